package nccl

import "testing"

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		code int
		want Version
		str  string
	}{
		{23007, Version{2, 30, 7}, "2.30.7"},
		{22803, Version{2, 28, 3}, "2.28.3"},
		{21903, Version{2, 19, 3}, "2.19.3"},
		{20906, Version{2, 9, 6}, "2.9.6"},
		{2708, Version{2, 7, 8}, "2.7.8"},
		{30000, Version{3, 0, 0}, "3.0.0"},
	} {
		got := ParseVersion(tc.code)
		if got != tc.want || got.String() != tc.str {
			t.Errorf("ParseVersion(%d) = %v (%q); want %v (%q)", tc.code, got, got.String(), tc.want, tc.str)
		}
	}
}

func TestVersionLess(t *testing.T) {
	for _, tc := range []struct {
		a, b Version
		want bool
	}{
		{Version{2, 28, 3}, MinVersion, true},
		{Version{2, 29, 99}, MinVersion, true},
		{Version{1, 99, 99}, MinVersion, true},
		{MinVersion, MinVersion, false},
		{Version{2, 30, 7}, MinVersion, false},
		{Version{2, 31, 0}, Version{2, 30, 9}, false},
		{Version{3, 0, 0}, Version{2, 30, 0}, false},
		{Version{2, 30, 0}, Version{2, 30, 1}, true},
	} {
		if got := tc.a.Less(tc.b); got != tc.want {
			t.Errorf("%v.Less(%v) = %v; want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestGINTypeString(t *testing.T) {
	for g, want := range map[GINType]string{GINNone: "none", GINProxy: "proxy", GINGDAKI: "GDAKI", GINGPI: "GPI", 1: "GINType(1)"} {
		if got := g.String(); got != want {
			t.Errorf("GINType(%d).String() = %q; want %q", int(g), got, want)
		}
	}
}
