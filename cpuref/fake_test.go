package cpuref

import (
	"fmt"
	"time"

	"github.com/epbench/epbench/ll"
)

// loopback is a one-rank communicator that copies without allocating.
type loopback struct{}

func (loopback) Rank() int { return 0 }
func (loopback) Size() int { return 1 }
func (loopback) Alltoallv(send []byte, sc, sd []int, recv []byte, rc, rd []int) error {
	if sc[0] != rc[0] {
		return fmt.Errorf("loopback: sending %d bytes, receiving %d", sc[0], rc[0])
	}
	copy(recv[rd[0]:rd[0]+rc[0]], send[sd[0]:sd[0]+sc[0]])
	return nil
}

// chanComm is one rank of an in-process group whose ranks are goroutines;
// links[s][q] carries rank s's blocks for rank q, in call order.
type chanComm struct {
	rank  int
	links [][]chan []byte
}

func newChanGroup(n int) []*chanComm {
	links := make([][]chan []byte, n)
	for s := range links {
		links[s] = make([]chan []byte, n)
		for q := range links[s] {
			links[s][q] = make(chan []byte, 1)
		}
	}
	g := make([]*chanComm, n)
	for r := range g {
		g[r] = &chanComm{rank: r, links: links}
	}
	return g
}

func (c *chanComm) Rank() int { return c.rank }
func (c *chanComm) Size() int { return len(c.links) }
func (c *chanComm) Alltoallv(send []byte, sc, sd []int, recv []byte, rc, rd []int) error {
	for q := range c.links {
		c.links[c.rank][q] <- append([]byte(nil), send[sd[q]:sd[q]+sc[q]]...)
	}
	for s := range c.links {
		block := <-c.links[s][c.rank]
		if len(block) != rc[s] {
			return fmt.Errorf("rank %d: %d bytes from rank %d, expected %d", c.rank, len(block), s, rc[s])
		}
		copy(recv[rd[s]:], block)
	}
	return nil
}

func (l loopback) AlltoallvDeadline(send []byte, sc, sd []int, recv []byte, rc, rd []int, _ int, _ time.Time) ([]int, error) {
	return nil, l.Alltoallv(send, sc, sd, recv, rc, rd)
}

// AlltoallvDeadline ignores the tag (the goroutine ranks never skip an
// exchange) and reports the ranks whose block did not come by the deadline.
func (c *chanComm) AlltoallvDeadline(send []byte, sc, sd []int, recv []byte, rc, rd []int, _ int, deadline time.Time) ([]int, error) {
	for q := range c.links {
		c.links[c.rank][q] <- append([]byte(nil), send[sd[q]:sd[q]+sc[q]]...)
	}
	var missing []int
	for s := range c.links {
		select {
		case block := <-c.links[s][c.rank]:
			if len(block) != rc[s] {
				return nil, fmt.Errorf("rank %d: %d bytes from rank %d, expected %d", c.rank, len(block), s, rc[s])
			}
			copy(recv[rd[s]:], block)
		case <-time.After(time.Until(deadline)):
			missing = append(missing, s)
		}
	}
	return missing, nil
}

// outputs is b's outputs now (Snapshot, waited for).
func outputs(b *Backend) (*ll.Outputs, error) {
	snap, err := b.Snapshot()
	if err != nil {
		return nil, err
	}
	return snap()
}
