package routing

import (
	"math"
	"slices"
	"testing"

	"github.com/epbench/epbench/bf16"
)

func TestTokenRowLayout(t *testing.T) {
	const hidden = 7168
	row, err := TokenRow(3, 1000, hidden) // 1000 = 3*256 + 232
	if err != nil {
		t.Fatal(err)
	}
	for c, v := range row {
		var want float32
		switch {
		case c < hidden-128:
			want = 3 - 128
		case c == hidden-128:
			want = 3
		default:
			want = 232
		}
		if got := bf16.ToFloat32(v); got != want {
			t.Fatalf("column %d = %v, want %v", c, got, want)
		}
	}
	// ep_bench v2.30.7 truncates where later versions round; the values are
	// exact, so both give these bits.
	if row[0] != bf16.Truncate(-125) || row[hidden-1] != bf16.Truncate(232) {
		t.Fatal("bits differ from truncation")
	}
}

func TestTokenRowsAndDecode(t *testing.T) {
	const tokens, hidden = 300, 256
	for _, rank := range []int{0, 1, 127, 128, 255, 384} {
		rows, err := TokenRows(rank, tokens, hidden)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != tokens*hidden {
			t.Fatalf("len = %d", len(rows))
		}
		for tok := 0; tok < tokens; tok++ {
			row := rows[tok*hidden : (tok+1)*hidden]
			single, _ := TokenRow(rank, tok, hidden)
			if !slices.Equal(row, single) {
				t.Fatalf("rank %d token %d: TokenRows and TokenRow differ", rank, tok)
			}
			r, tk, ok := DecodeRow(row)
			if !ok || r != rank || tk != tok {
				t.Fatalf("DecodeRow = (%d, %d, %v), want (%d, %d, true)", r, tk, ok, rank, tok)
			}
		}
	}
	// The extremes of the token range.
	for _, tok := range []int{0, 255, 256, MaxValidationTokens - 1} {
		row, err := TokenRow(7, tok, MinValidationHidden)
		if err != nil {
			t.Fatal(err)
		}
		if r, tk, ok := DecodeRow(row); !ok || r != 7 || tk != tok {
			t.Fatalf("token %d: DecodeRow = (%d, %d, %v)", tok, r, tk, ok)
		}
	}
}

func TestDecodeRowDetectsCorruption(t *testing.T) {
	const hidden = 512
	good, _ := TokenRow(5, 700, hidden)
	corrupt := func(col int, v uint16) []uint16 {
		row := slices.Clone(good)
		row[col] = v
		return row
	}
	nan := bf16.FromFloat32(float32(math.NaN()))
	cases := []struct {
		name      string
		row       []uint16
		rank, tok int
	}{
		{"rank column differs", corrupt(100, bf16.FromFloat32(-122)), 5, 700},
		{"last rank column differs", corrupt(hidden-129, 0), 5, 700},
		{"low byte column differs", corrupt(hidden-50, bf16.FromFloat32(1)), 5, 700},
		{"first low byte column differs", corrupt(hidden-127, 0), 5, 700},
		{"rank not an integer", corrupt(0, bf16.FromFloat32(-122.5)), -1, 700},
		{"rank NaN", corrupt(0, nan), -1, 700},
		{"high byte not an integer", corrupt(hidden-128, bf16.FromFloat32(2.5)), 5, -1},
		{"high byte negative", corrupt(hidden-128, bf16.FromFloat32(-1)), 5, -256 + 188},
		{"rank below range", fill(hidden, -129, 0, 0), -1, 0},
		{"too short", good[:128], -1, -1},
		{"empty", nil, -1, -1},
	}
	for _, c := range cases {
		r, tk, ok := DecodeRow(c.row)
		if ok {
			t.Errorf("%s: DecodeRow accepted the row", c.name)
		}
		if r != c.rank || tk != c.tok {
			t.Errorf("%s: DecodeRow = (%d, %d), want (%d, %d)", c.name, r, tk, c.rank, c.tok)
		}
	}
}

// fill builds a row with the given field values, bypassing range checks.
func fill(hidden int, rankValue, hi, lo float32) []uint16 {
	row := make([]uint16, hidden)
	for c := range row {
		switch {
		case c < hidden-TokenIDCols:
			row[c] = bf16.FromFloat32(rankValue)
		case c == hidden-TokenIDCols:
			row[c] = bf16.FromFloat32(hi)
		default:
			row[c] = bf16.FromFloat32(lo)
		}
	}
	return row
}

func TestTokenRowErrors(t *testing.T) {
	cases := []struct {
		rank, tok, hidden int
		want              string
	}{
		{0, 0, 128, "routing: hidden 128 is below 129, too narrow for the token id columns"},
		{-1, 0, 256, "routing: rank -1 outside [0, 385), not encodable exactly in bf16"},
		{385, 0, 256, "routing: rank 385 outside [0, 385), not encodable exactly in bf16"},
		{0, -1, 256, "routing: token -1 outside [0, 65536), not encodable in the token id columns"},
		{0, 65536, 256, "routing: token 65536 outside [0, 65536), not encodable in the token id columns"},
	}
	for _, c := range cases {
		row, err := TokenRow(c.rank, c.tok, c.hidden)
		if err == nil || err.Error() != c.want || row != nil {
			t.Errorf("TokenRow(%d, %d, %d): err = %v, want %q", c.rank, c.tok, c.hidden, err, c.want)
		}
	}
	rowsCases := []struct {
		rank, tokens, hidden int
		want                 string
	}{
		{0, 0, 256, "routing: tokens must be positive, got 0"},
		{0, 65537, 256, "routing: 65537 tokens exceed 65536, the most the token id columns can encode"},
		{0, 4, 100, "routing: hidden 100 is below 129, too narrow for the token id columns"},
		{400, 4, 256, "routing: rank 400 outside [0, 385), not encodable exactly in bf16"},
	}
	for _, c := range rowsCases {
		rows, err := TokenRows(c.rank, c.tokens, c.hidden)
		if err == nil || err.Error() != c.want || rows != nil {
			t.Errorf("TokenRows(%d, %d, %d): err = %v, want %q", c.rank, c.tokens, c.hidden, err, c.want)
		}
	}
	if err := FillTokenRow(make([]uint16, 64), 0, 0); err == nil {
		t.Error("FillTokenRow accepted a 64-column row")
	}
}

func TestWeights(t *testing.T) {
	w, err := Weights(0, 128, 8)
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != 128*8 {
		t.Fatalf("len = %d", len(w))
	}
	// The same draws as |normal_distribution<float>| over mt19937(42).
	g := NewMT19937(42)
	var n NormalFloat32
	for i, v := range w {
		d := float32(math.Abs(float64(n.Next(g))))
		want := d
		if d < MinWeight {
			want = MinWeight
		}
		if v != want || v < MinWeight {
			t.Fatalf("weight %d = %v, want %v", i, v, want)
		}
	}
	// Row-major, one draw per slot: a wider top-k reshuffles rows but keeps
	// the sequence.
	w4, _ := Weights(0, 256, 4)
	if !slices.Equal(w, w4) {
		t.Fatal("weights are not one draw per slot in row-major order")
	}
	w1, _ := Weights(1, 128, 8)
	if slices.Equal(w, w1) {
		t.Fatal("ranks 0 and 1 have the same weights")
	}

	errCases := []struct {
		tokens, topk int
		want         string
	}{
		{0, 8, "routing: tokens must be positive, got 0"},
		{8, 0, "routing: top-k must be positive, got 0"},
		{1 << 30, 8, "routing: tokens*top-k (1073741824*8) exceeds 2147483647"},
	}
	for _, c := range errCases {
		if w, err := Weights(0, c.tokens, c.topk); err == nil || err.Error() != c.want || w != nil {
			t.Errorf("Weights(0, %d, %d): err = %v, want %q", c.tokens, c.topk, err, c.want)
		}
	}
}
