package nccl

import "fmt"

// Version is an NCCL release.
type Version struct{ Major, Minor, Patch int }

// MinVersion is the oldest NCCL epbench loads: the first with
// ncclGetPeerDevicePointer and the 2.30 layout of ncclCommQueryProperties.
var MinVersion = Version{2, 30, 0}

// ParseVersion decodes an ncclGetVersion code: X*10000+Y*100+Z from 2.9 on
// (23007 is 2.30.7), X*1000+Y*100+Z before (2708 is 2.7.8).
func ParseVersion(code int) Version {
	if code >= 10000 {
		return Version{code / 10000, code % 10000 / 100, code % 100}
	}
	return Version{code / 1000, code % 1000 / 100, code % 100}
}

// Less reports whether v is an earlier release than o.
func (v Version) Less(o Version) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor < o.Minor
	}
	return v.Patch < o.Patch
}

func (v Version) String() string {
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
}
