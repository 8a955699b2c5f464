package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckOutputs(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "old.json")
	if err := os.WriteFile(existing, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		outputs map[string]string
		want    string
	}{
		{map[string]string{"--json": ""}, ""},
		{map[string]string{"--json": filepath.Join(dir, "new.json"), "--csv": existing}, ""},
		{map[string]string{"--json": filepath.Join(dir, "no", "such", "r.json")},
			"--json: cannot create " + filepath.Join(dir, "no", "such", "r.json") + ": no folder " + filepath.Join(dir, "no", "such")},
		{map[string]string{"--json": dir}, "--json: cannot create " + dir + ": it is a folder"},
		{map[string]string{"--csv": filepath.Join(file, "r.csv")},
			"--csv: cannot create " + filepath.Join(file, "r.csv") + ": not a directory"},
		// Flags are checked in name order.
		{map[string]string{"--json": dir, "--csv": dir}, "--csv: cannot create " + dir + ": it is a folder"},
	} {
		err := CheckOutputs(tc.outputs)
		if got := errString(err); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.outputs, got, tc.want)
		}
	}
	// Nothing was created or changed.
	if b, err := os.ReadFile(existing); err != nil || string(b) != "kept" {
		t.Errorf("existing file: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.json")); !os.IsNotExist(err) {
		t.Errorf("new.json was created: %v", err)
	}

	if os.Geteuid() == 0 {
		t.Log("root may write anywhere: the permission cases are not checked")
		return
	}
	locked := filepath.Join(dir, "locked")
	if err := os.Mkdir(locked, 0o555); err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(dir, "ro.json")
	if err := os.WriteFile(ro, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		filepath.Join(locked, "r.json"): "permission denied",
		ro:                              "permission denied",
	} {
		err := CheckOutputs(map[string]string{"--json": path})
		if err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%s: %v, want ...%s", path, err, want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
