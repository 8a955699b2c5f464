package kernels_test

import (
	"testing"

	"github.com/epbench/epbench/kernels"
	"github.com/epbench/epbench/nccl"
)

// The GIN modules are built against the NCCL device headers whose device
// communicator the host asks NCCL for (their sizes are held equal at
// compile time, gpu/gin.go, which `make build` compiles).
func TestGINModulesMatchTheHostsDeviceCommunicator(t *testing.T) {
	if v := nccl.ParseVersion(kernels.NCCLVersion); v != nccl.GINHeadersVersion {
		t.Errorf("kernels/nccl.version is NCCL %s, the host asks for NCCL %s's device communicator", v, nccl.GINHeadersVersion)
	}
}
