package mpi_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/epbench/epbench/mpi"
)

func TestAllgatherConcatenatesInRankOrder(t *testing.T) {
	requireMPI(t)
	rank, size := rankSize(t)
	var (
		gotBytes []byte
		got32    []int32
		got64    []int64
		gotF     []float64
		gotEmpty []byte
		errs     [5]error
	)
	onMain(func() {
		gotBytes, errs[0] = mpi.AllgatherBytes([]byte{byte(rank), byte(2 * rank), byte(0xa0 + rank)})
		got32, errs[1] = mpi.AllgatherInt32([]int32{int32(rank) - 5, int32(rank) * 1000})
		got64, errs[2] = mpi.AllgatherInt64([]int64{int64(rank)<<40 | 7})
		gotF, errs[3] = mpi.AllgatherFloat64([]float64{float64(rank) + 0.5, -float64(rank)})
		gotEmpty, errs[4] = mpi.AllgatherBytes(nil)
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("allgather %d: %v", i, err)
		}
	}
	var wantBytes []byte
	var want32 []int32
	var want64 []int64
	var wantF []float64
	for r := range size {
		wantBytes = append(wantBytes, byte(r), byte(2*r), byte(0xa0+r))
		want32 = append(want32, int32(r)-5, int32(r)*1000)
		want64 = append(want64, int64(r)<<40|7)
		wantF = append(wantF, float64(r)+0.5, -float64(r))
	}
	if !slices.Equal(gotBytes, wantBytes) {
		t.Errorf("AllgatherBytes = %v, want %v", gotBytes, wantBytes)
	}
	if !slices.Equal(got32, want32) {
		t.Errorf("AllgatherInt32 = %v, want %v", got32, want32)
	}
	if !slices.Equal(got64, want64) {
		t.Errorf("AllgatherInt64 = %v, want %v", got64, want64)
	}
	if !slices.Equal(gotF, wantF) {
		t.Errorf("AllgatherFloat64 = %v, want %v", gotF, wantF)
	}
	if len(gotEmpty) != 0 {
		t.Errorf("AllgatherBytes(nil) = %v, want empty", gotEmpty)
	}
}

func TestAllgatherRejectsUnequalContributions(t *testing.T) {
	requireMPI(t)
	rank, size := rankSize(t)
	var err, after error
	onMain(func() {
		_, err = mpi.AllgatherBytes(make([]byte, rank+1))
		after = mpi.Barrier()
	})
	var parts []string
	for r := range size {
		parts = append(parts, fmt.Sprintf("rank %d: %d", r, r+1))
	}
	want := "mpi: Allgather: ranks contribute different element counts (" + strings.Join(parts, ", ") + ")"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if after != nil {
		t.Errorf("Barrier after the refused Allgather: %v", after)
	}
}

// a2aCount is how many bytes rank src sends to rank dst: rank-dependent and
// zero for some pairs.
func a2aCount(src, dst int) int { return (src + 2*dst) % 3 * 5 }

func a2aByte(src, dst, i int) byte { return byte(37*src + 11*dst + i) }

func TestAlltoallvRankDependentCounts(t *testing.T) {
	requireMPI(t)
	rank, size := rankSize(t)
	const gap, fill = 1, 0xee

	// Send blocks in rank order with a gap after each, receive blocks in
	// reverse rank order with gaps, so misread displacements show up.
	sendCounts, sendDispls := make([]int, size), make([]int, size)
	var send []byte
	for d := range size {
		sendCounts[d], sendDispls[d] = a2aCount(rank, d), len(send)
		for i := range sendCounts[d] {
			send = append(send, a2aByte(rank, d, i))
		}
		send = append(send, 0)
	}
	recvCounts, recvDispls := make([]int, size), make([]int, size)
	off := 0
	for s := size - 1; s >= 0; s-- {
		recvCounts[s], recvDispls[s] = a2aCount(s, rank), off+gap
		off += gap + recvCounts[s]
	}
	recv := make([]byte, off+gap)
	for i := range recv {
		recv[i] = fill
	}
	var err error
	onMain(func() { err = mpi.Alltoallv(send, sendCounts, sendDispls, recv, recvCounts, recvDispls) })
	if err != nil {
		t.Fatalf("Alltoallv: %v", err)
	}
	want := make([]byte, len(recv))
	for i := range want {
		want[i] = fill
	}
	for s := range size {
		for i := range recvCounts[s] {
			want[recvDispls[s]+i] = a2aByte(s, rank, i)
		}
	}
	if !slices.Equal(recv, want) {
		t.Errorf("rank %d received %v, want %v", rank, recv, want)
	}
}

func TestAlltoallvRejectsBadLayout(t *testing.T) {
	requireMPI(t)
	_, size := rankSize(t)
	ok := func() []int { return make([]int, size) }
	counts := func(last int) []int { c := make([]int, size); c[size-1] = last; return c }
	cases := []struct {
		name           string
		send, recv     []byte
		sc, sd, rc, rd []int
		want           string
	}{
		{"short send counts", nil, nil, make([]int, size-1), ok(), ok(), ok(),
			fmt.Sprintf("mpi: Alltoallv: %d send counts for %d ranks", size-1, size)},
		{"long recv displacements", nil, nil, ok(), ok(), ok(), make([]int, size+1),
			fmt.Sprintf("mpi: Alltoallv: %d recv displacements for %d ranks", size+1, size)},
		{"negative count", make([]byte, 4), nil, counts(-1), ok(), ok(), ok(),
			fmt.Sprintf("mpi: Alltoallv: send count for rank %d is negative (-1)", size-1)},
		{"negative displacement", nil, make([]byte, 4), ok(), ok(), ok(), counts(-2),
			fmt.Sprintf("mpi: Alltoallv: recv displacement for rank %d is negative (-2)", size-1)},
		{"send block past the end", make([]byte, 8), nil, counts(5), counts(4), ok(), ok(),
			fmt.Sprintf("mpi: Alltoallv: send block for rank %d [4, 9) exceeds the 8-byte buffer", size-1)},
		{"recv count larger than buffer", nil, make([]byte, 3), ok(), ok(), counts(4), ok(),
			fmt.Sprintf("mpi: Alltoallv: recv block for rank %d [0, 4) exceeds the 3-byte buffer", size-1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			onMain(func() { err = mpi.Alltoallv(c.send, c.sc, c.sd, c.recv, c.rc, c.rd) })
			if err == nil || err.Error() != c.want {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}

func TestAllreduceSumMinMax(t *testing.T) {
	requireMPI(t)
	rank, size := rankSize(t)
	const width = 4
	n := int64(size)
	tri := n * (n + 1) / 2 // sum of rank+1 over all ranks
	f := make([]float64, width)
	i64 := make([]int64, width)
	i32 := make([]int32, width)
	for i := range width {
		f[i] = float64((rank + 1) * (i + 1))
		// Above 2^32 so a 32-bit reduction would be caught.
		i64[i] = int64(rank+1)<<33 + int64(i)
		i32[i] = -int32((rank + 1) * (i + 1))
	}
	for _, op := range []mpi.Op{mpi.Sum, mpi.Min, mpi.Max} {
		var (
			gotF   []float64
			got64  []int64
			got32  []int32
			e1, e2 error
			e3     error
		)
		onMain(func() {
			gotF, e1 = mpi.AllreduceFloat64(f, op)
			got64, e2 = mpi.AllreduceInt64(i64, op)
			got32, e3 = mpi.AllreduceInt32(i32, op)
		})
		if e1 != nil || e2 != nil || e3 != nil {
			t.Fatalf("%v: %v, %v, %v", op, e1, e2, e3)
		}
		wantF := make([]float64, width)
		want64 := make([]int64, width)
		want32 := make([]int32, width)
		for i := range width {
			k := int64(i + 1)
			switch op {
			case mpi.Sum:
				wantF[i], want64[i], want32[i] = float64(k*tri), tri<<33+n*int64(i), int32(-k*tri)
			case mpi.Min:
				wantF[i], want64[i], want32[i] = float64(k), 1<<33+int64(i), int32(-k*n)
			case mpi.Max:
				wantF[i], want64[i], want32[i] = float64(k*n), n<<33+int64(i), int32(-k)
			}
		}
		if !slices.Equal(gotF, wantF) || !slices.Equal(got64, want64) || !slices.Equal(got32, want32) {
			t.Errorf("%v: float64 %v int64 %v int32 %v; want %v %v %v", op, gotF, got64, got32, wantF, want64, want32)
		}
	}
}

func TestAllreduceRejectsUnknownOp(t *testing.T) {
	requireMPI(t)
	// Op(4) is the C value of MINLOC, which only the Loc functions may use.
	for _, op := range []mpi.Op{0, 4, 99} {
		var err error
		onMain(func() { _, err = mpi.AllreduceFloat64([]float64{1}, op) })
		want := fmt.Sprintf("mpi: Allreduce: unsupported reduction Op(%d)", int(op))
		if err == nil || err.Error() != want {
			t.Errorf("Op(%d): error %v, want %q", int(op), err, want)
		}
	}
}

func TestAllreduceMinLocMaxLoc(t *testing.T) {
	requireMPI(t)
	rank, size := rankSize(t)
	// Element 0 has its extremes away from rank 0, element 1 is a tie (MPI
	// picks the lowest rank), element 2 decreases with rank.
	value := func(r, elem int) float64 {
		switch elem {
		case 0:
			return float64((r + 1) % size)
		case 1:
			return 42
		}
		return -1.5 * float64(r)
	}
	const elems = 3
	send := make([]mpi.ValueRank, elems)
	for e := range elems {
		send[e] = mpi.ValueRank{Value: value(rank, e), Rank: rank}
	}
	var gotMin, gotMax []mpi.ValueRank
	var e1, e2 error
	onMain(func() {
		gotMin, e1 = mpi.AllreduceMinLoc(send)
		gotMax, e2 = mpi.AllreduceMaxLoc(send)
	})
	if e1 != nil || e2 != nil {
		t.Fatalf("MinLoc: %v, MaxLoc: %v", e1, e2)
	}
	wantMin := make([]mpi.ValueRank, elems)
	wantMax := make([]mpi.ValueRank, elems)
	for e := range elems {
		wantMin[e] = mpi.ValueRank{Value: value(0, e), Rank: 0}
		wantMax[e] = wantMin[e]
		for r := 1; r < size; r++ {
			if v := value(r, e); v < wantMin[e].Value {
				wantMin[e] = mpi.ValueRank{Value: v, Rank: r}
			}
			if v := value(r, e); v > wantMax[e].Value {
				wantMax[e] = mpi.ValueRank{Value: v, Rank: r}
			}
		}
	}
	if !slices.Equal(gotMin, wantMin) {
		t.Errorf("MinLoc = %v, want %v", gotMin, wantMin)
	}
	if !slices.Equal(gotMax, wantMax) {
		t.Errorf("MaxLoc = %v, want %v", gotMax, wantMax)
	}
}
