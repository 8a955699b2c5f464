package routing

// scoredExpert is one (score, expert) pair of ep_bench's score_idx vector.
type scoredExpert struct {
	score  float32
	expert int32
}

// before is ep_bench's partial_sort comparator: a.first > b.first. It looks at
// the score only, so the expert order among equal scores is whatever the heap
// moves below leave behind.
func before(a, b scoredExpert) bool { return a.score > b.score }

// partialSortDesc reproduces libstdc++'s std::partial_sort(s, s+k, s+len(s),
// before) step for step (GCC 12 stl_algo.h / stl_heap.h: __heap_select then
// __sort_heap), so ties end in the same order. Callers pass 1 <= k <= len(s);
// anything else leaves s as it is.
func partialSortDesc(s []scoredExpert, k int) {
	if k < 1 || k > len(s) {
		return
	}
	heapSelect(s, k)
	sortHeap(s[:k])
}

// heapSelect builds a heap over s[:k] and swaps in every later element that
// beats the heap's top.
func heapSelect(s []scoredExpert, k int) {
	makeHeap(s[:k])
	for i := k; i < len(s); i++ {
		if before(s[i], s[0]) {
			popHeap(s[:k], i, s)
		}
	}
}

func makeHeap(h []scoredExpert) {
	n := len(h)
	if n < 2 {
		return
	}
	for parent := (n - 2) / 2; ; parent-- {
		adjustHeap(h, parent, n, h[parent])
		if parent == 0 {
			return
		}
	}
}

// popHeap moves the top of heap h to s[result] and re-heaps h with the value
// that was at s[result] (std::__pop_heap with a separate result position).
func popHeap(h []scoredExpert, result int, s []scoredExpert) {
	v := s[result]
	s[result] = h[0]
	adjustHeap(h, 0, len(h), v)
}

func sortHeap(h []scoredExpert) {
	for last := len(h) - 1; last > 0; last-- {
		popHeap(h[:last], last, h)
	}
}

// adjustHeap is std::__adjust_heap: sift the hole at index hole down to a
// leaf along the preferred children, then push v back up from there.
func adjustHeap(h []scoredExpert, hole, n int, v scoredExpert) {
	top := hole
	child := hole
	for child < (n-1)/2 {
		child = 2 * (child + 1)
		if before(h[child], h[child-1]) {
			child--
		}
		h[hole] = h[child]
		hole = child
	}
	if n&1 == 0 && child == (n-2)/2 {
		child = 2 * (child + 1)
		h[hole] = h[child-1]
		hole = child - 1
	}
	pushHeap(h, hole, top, v)
}

// pushHeap is std::__push_heap: move v up from hole while its parent ranks
// below it.
func pushHeap(h []scoredExpert, hole, top int, v scoredExpert) {
	parent := (hole - 1) / 2
	for hole > top && before(h[parent], v) {
		h[hole] = h[parent]
		hole = parent
		parent = (hole - 1) / 2
	}
	h[hole] = v
}
