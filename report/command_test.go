package report

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The compare table of several ep_bench outputs: every column stays apart
// from its neighbours and is labelled by the shortest form of its file name
// that tells the inputs apart (the common ".ep_bench" left out).
func TestCompareColumnsStayApart(t *testing.T) {
	ref := filepath.Join("testdata", "reference")
	var out bytes.Buffer
	err := CompareCommand([]string{
		filepath.Join(ref, "ll_t128_i50.ep_bench.out"),
		filepath.Join(ref, "ll_t128_i200.ep_bench.out"),
		filepath.Join(ref, "ll_t32_i50.ep_bench.out"),
	}, &out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	var header string
	for _, l := range lines {
		if strings.HasPrefix(l, "metric ") {
			header = l
		}
	}
	if got, want := strings.Fields(header), []string{"metric", "ll_t128_i50", "ll_t128_i200", "ll_t32_i50"}; !slices.Equal(got, want) {
		t.Errorf("header fields %q, want %q\n%s", got, want, out.String())
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "Host ") && !strings.HasPrefix(l, "Kernel ") || strings.Contains(l, "ratio") {
			continue
		}
		if len(l) != len(header) {
			t.Errorf("row %q is %d wide, the header %d", l, len(l), len(header))
		}
		// Every number is preceded by at least two spaces.
		if f := strings.Fields(l); len(f) != 3+3 {
			t.Errorf("row %q has %d fields, want 6", l, len(f))
		}
		if strings.Count(l, "  ") < 3 {
			t.Errorf("row %q: columns run together", l)
		}
	}
	if !strings.Contains(out.String(), "Host Dispatch avg                40.40         39.96         30.56\n") {
		t.Errorf("numbers moved:\n%s", out.String())
	}
}

func TestLabels(t *testing.T) {
	for _, tc := range []struct {
		paths, want []string
	}{
		{[]string{"ll_t128_i50.ep_bench.out"}, []string{"ll_t128_i50.ep_bench"}},
		{[]string{"a/ll_t128_i50.ep_bench.out", "b/ll_t32_i50.ep_bench.out"}, []string{"ll_t128_i50", "ll_t32_i50"}},
		// The same name in two folders: the folders tell them apart.
		{[]string{"run1/ours.txt", "run2/ours.txt", "ll_t128_i50.ep_bench.out"}, []string{"run1/ours", "run2/ours", "ll_t128_i50.ep_bench"}},
		{[]string{"x/run/ours.txt", "y/run/ours.txt"}, []string{"x/run/ours", "y/run/ours"}},
		// A common suffix is kept where leaving it out would make two alike.
		{[]string{"a.x.out", "a.y.out"}, []string{"a.x", "a.y"}},
		{[]string{"a.x.out", "a.x.json"}, []string{"a.x.out", "a.x.json"}},
		// The same file twice.
		{[]string{"r.out", "r.out"}, []string{"r", "r#2"}},
		{[]string{"/tmp/nccl-ep", "mscclpp.txt"}, []string{"nccl-ep", "mscclpp"}},
		{[]string{".hidden", "x/.hidden"}, []string{".hidden", "x/.hidden"}},
	} {
		if got := Labels(tc.paths); !slices.Equal(got, tc.want) {
			t.Errorf("Labels(%q) = %q, want %q", tc.paths, got, tc.want)
		}
	}
}

// Impossible numbers are refused with the file and the line named, by
// compare as by every reader of summaries.
func TestCompareRejectsImpossibleNumbers(t *testing.T) {
	src := string(mustRead(t, "reference/ll_t1_i50.ep_bench.out"))
	dir := t.TempDir()
	for _, tc := range []struct{ name, from, to, want string }{
		{"nan", "avg=27.09 us", "avg=nan us", `line 41: impossible value "nan"`},
		{"-nan", "avg=27.09 us", "avg=-nan us", `line 41: impossible value "-nan"`},
		{"negative", "min=24.29 us", "min=-24.29 us", `line 41: impossible value "-24.29"`},
		{"infinite", "max=40.67 us", "max=inf us", `line 41: impossible value "inf"`},
		{"negative throughput", "avg=1.06 GB/s", "avg=-1.06 GB/s", `line 42: impossible value "-1.06"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(src, tc.from) {
				t.Fatalf("the reference holds no %q", tc.from)
			}
			path := filepath.Join(dir, tc.name+".out")
			if err := os.WriteFile(path, []byte(strings.Replace(src, tc.from, tc.to, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			err := CompareCommand([]string{path}, &bytes.Buffer{})
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrCompareUsage) || !errors.Is(err, ErrBadSummary) {
				t.Errorf("%v: not a usage error on a malformed summary", err)
			}
			want := "compare: " + path + ": report: malformed summary: " + tc.want
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("got  %q\nwant %q...", err, want)
			}
		})
	}
}

// Error messages name a path once, and the usage line says one file is
// enough.
func TestCompareCommandMessages(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"/etc/hostname-does-not-exist"}, "compare: open /etc/hostname-does-not-exist: no such file or directory"},
		{[]string{filepath.Join("testdata", "formats", "README.md")},
			"compare: " + filepath.Join("testdata", "formats", "README.md") + ": report: no low-latency summary found"},
		{nil, "compare: need at least one summary file (see epbench compare --help)"},
	} {
		err := CompareCommand(tc.args, &bytes.Buffer{})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: got %v, want %q", tc.args, err, tc.want)
		}
	}
	var help bytes.Buffer
	if err := CompareCommand([]string{"--help"}, &help); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(help.String(), "usage: epbench compare [--kernel-only] [--label NAME ...] FILE [FILE ...]\n") {
		t.Errorf("usage line: %q", strings.SplitN(help.String(), "\n", 2)[0])
	}
}
