package kernels

// Block geometry of ll.cu, mirrored here because the host must know how many
// system-scope releases each source rank makes per call.
const (
	warpsPerBlock = ThreadsPerBlock / 32
	sliceVecs     = 32 * 2 // kSliceVecs: 16-byte vectors per combine row slice
)

// DispatchSenders is the number of blocks of a dispatch grid that send
// tokens, and so signal every peer: the tokens are cut into that many
// contiguous ranges, one per block.
func DispatchSenders(grid, tokens int) int { return min(grid, tokens) }

// CombineSenders is the number of blocks of a combine grid that signal every
// rank: those that own expert-side work items of the peers' slots ((ranks-1)
// × tokens × row slices, one per warp, strided over the grid), or with one
// rank, of the own slots (tokens × row slices).
func CombineSenders(grid, ranks, tokens, hidden int) int {
	slices := (hidden/8 + sliceVecs - 1) / sliceVecs
	items := max(ranks-1, 1) * tokens * slices
	return min(grid, (items+warpsPerBlock-1)/warpsPerBlock)
}
