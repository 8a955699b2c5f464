package mpi

import (
	"errors"
	"fmt"
)

// Shorthands for the operations of World, which is what most callers use.

// Barrier is World().Barrier.
func Barrier() error { return World().Barrier() }

// Bcast is World().Bcast.
func Bcast(buf []byte, root int) error { return World().Bcast(buf, root) }

// AllgatherBytes is World().AllgatherBytes.
func AllgatherBytes(send []byte) ([]byte, error) { return World().AllgatherBytes(send) }

// AllgatherInt32 is World().AllgatherInt32.
func AllgatherInt32(send []int32) ([]int32, error) { return World().AllgatherInt32(send) }

// AllgatherInt64 is World().AllgatherInt64.
func AllgatherInt64(send []int64) ([]int64, error) { return World().AllgatherInt64(send) }

// AllgatherFloat64 is World().AllgatherFloat64.
func AllgatherFloat64(send []float64) ([]float64, error) { return World().AllgatherFloat64(send) }

// Alltoallv is World().Alltoallv.
func Alltoallv(send []byte, sendCounts, sendDispls []int, recv []byte, recvCounts, recvDispls []int) error {
	return World().Alltoallv(send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
}

// AllreduceFloat64 is World().AllreduceFloat64.
func AllreduceFloat64(send []float64, op Op) ([]float64, error) {
	return World().AllreduceFloat64(send, op)
}

// AllreduceInt64 is World().AllreduceInt64.
func AllreduceInt64(send []int64, op Op) ([]int64, error) { return World().AllreduceInt64(send, op) }

// AllreduceInt32 is World().AllreduceInt32.
func AllreduceInt32(send []int32, op Op) ([]int32, error) { return World().AllreduceInt32(send, op) }

// AllreduceMinLoc is World().AllreduceMinLoc.
func AllreduceMinLoc(send []ValueRank) ([]ValueRank, error) { return World().AllreduceMinLoc(send) }

// AllreduceMaxLoc is World().AllreduceMaxLoc.
func AllreduceMaxLoc(send []ValueRank) ([]ValueRank, error) { return World().AllreduceMaxLoc(send) }

// Isend is World().Isend.
func Isend(buf []byte, dest, tag int) (*Request, error) { return World().Isend(buf, dest, tag) }

// Irecv is World().Irecv.
func Irecv(buf []byte, src, tag int) (*Request, error) { return World().Irecv(buf, src, tag) }

// Ibarrier is World().Ibarrier.
func Ibarrier() (*Request, error) { return World().Ibarrier() }

// WaitAll waits for every request in reqs and joins their errors.
func WaitAll(reqs []*Request) error {
	var errs []error
	for i, r := range reqs {
		if err := r.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("request %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}
