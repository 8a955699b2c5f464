package kernels

import (
	"errors"
	"strings"
	"testing"

	"github.com/epbench/epbench/config"
)

// plan is the plan of the defaults (2 ranks over NVLink, 132 blocks) with
// edit applied to the configuration.
func plan(t *testing.T, edit func(c *config.Config), s Setup) *Plan {
	t.Helper()
	c := config.Default()
	if edit != nil {
		edit(c)
	}
	s.Cfg = c
	if s.Ranks == 0 {
		s.Ranks = 2
	}
	if s.Grid == 0 {
		s.Grid = 132
	}
	p, err := NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInline(t *testing.T) {
	for _, c := range []struct {
		p              config.Protocol
		tokens, hidden int
		want           bool
	}{
		{config.ProtocolAuto, 1, 7168, true},
		{config.ProtocolAuto, 2, 7168, true}, // 28 KiB of rows
		{config.ProtocolAuto, 3, 7168, false},
		{config.ProtocolAuto, 128, 7168, false},
		{config.ProtocolAuto, 1, 16384, true},
		{config.ProtocolAuto, 2, 16384, false},
		{config.ProtocolAuto, 15, 128, true}, // small rows: up to config.InlineMaxTokens
		{config.ProtocolAuto, 16, 128, false},
		{config.ProtocolInline, 15, 7168, true},
		{config.ProtocolFenced, 1, 7168, false},
		{config.ProtocolLines, 1, 7168, false},
	} {
		p := plan(t, func(cfg *config.Config) { cfg.Protocol, cfg.Hidden = c.p, c.hidden }, Setup{LinesVerified: true})
		if got := p.Inline(c.tokens); got != c.want {
			t.Errorf("%v: Inline(%d) at hidden %d = %v, want %v", c.p, c.tokens, c.hidden, got, c.want)
		}
	}
}

func TestDispatchLines(t *testing.T) {
	for _, c := range []struct {
		p      config.Protocol
		tokens int
		dt     config.DispatchDtype
		nvlink bool
		want   bool
	}{
		{config.ProtocolLines, 1, config.DtypeBF16, true, true},
		{config.ProtocolLines, 4096, config.DtypeFP8E4M3, true, true},
		{config.ProtocolAuto, 128, config.DtypeBF16, true, true},
		{config.ProtocolAuto, 3, config.DtypeBF16, true, true},
		{config.ProtocolAuto, 2, config.DtypeBF16, true, false}, // inline
		{config.ProtocolAuto, 128, config.DtypeFP8E4M3, true, false},
		{config.ProtocolAuto, 128, config.DtypeBF16, false, false}, // lines needs NVLink
		{config.ProtocolFenced, 128, config.DtypeBF16, true, false},
	} {
		p := plan(t, func(cfg *config.Config) { cfg.Protocol, cfg.DispatchDtype, cfg.Tokens = c.p, c.dt, 4096 }, Setup{LinesVerified: c.nvlink})
		if got := p.DispatchLines(c.tokens); got != c.want {
			t.Errorf("%v: DispatchLines(%d), %v, nvlink %v = %v, want %v", c.p, c.tokens, c.dt, c.nvlink, got, c.want)
		}
	}
}

func TestCombineLines(t *testing.T) {
	for _, c := range []struct {
		p      config.Protocol
		tokens int
		nvlink bool
		want   bool
	}{
		{config.ProtocolAuto, 128, true, true},
		{config.ProtocolAuto, 3, true, true},
		{config.ProtocolAuto, 2, true, false}, // inline
		{config.ProtocolAuto, 128, false, false},
		{config.ProtocolLines, 1, true, true},
		{config.ProtocolFenced, 128, true, false},
	} {
		p := plan(t, func(cfg *config.Config) { cfg.Protocol = c.p }, Setup{LinesVerified: c.nvlink})
		if got := p.CombineLines(c.tokens); got != c.want {
			t.Errorf("%v: CombineLines(%d), nvlink %v = %v, want %v", c.p, c.tokens, c.nvlink, got, c.want)
		}
	}
}

func TestNewPlanRefuses(t *testing.T) {
	c := config.Default()
	c.Protocol = config.ProtocolLines
	var ue *config.UsageError
	if _, err := NewPlan(Setup{Cfg: c, Ranks: 2, Grid: 132}); !errors.As(err, &ue) || ue.Flag != "--protocol" {
		t.Errorf("--protocol lines where lines are not verified: %v, want a usage error of --protocol", err)
	}
	c = config.Default()
	if _, err := NewPlan(Setup{Cfg: c, Ranks: 512, Grid: 132}); err == nil {
		t.Error("512 ranks were planned")
	}
	if _, err := NewPlan(Setup{Cfg: c, Ranks: 2, Grid: 0}); err == nil {
		t.Error("an empty grid was planned")
	}
	// Peers through GIN: what its kernels leave out is refused with the
	// flag that asks for it, as -n is at flag parsing (config.GINUnsupported).
	for _, e := range []struct {
		edit func(*config.Config)
		flag string
	}{
		{func(c *config.Config) { c.CombineMode = config.DirectSend }, "--combine-mode"},
		{func(c *config.Config) { c.Protocol = config.ProtocolInline }, "--protocol"},
		{func(c *config.Config) { c.Protocol = config.ProtocolLines }, "--protocol"},
	} {
		c = config.Default()
		e.edit(c)
		_, err := NewPlan(Setup{Cfg: c, Ranks: 2, Grid: 132, GIN: true, LinesVerified: true})
		if !errors.As(err, &ue) || ue.Flag != e.flag || !strings.Contains(ue.Why, "GIN") {
			t.Errorf("GIN peers with %s refused as %v, want a usage error of %s naming GIN", e.flag, err, e.flag)
		}
	}
	if _, err := NewPlan(Setup{Cfg: config.Default(), Ranks: 2, Grid: 132, GIN: true}); err != nil {
		t.Errorf("GIN peers with the defaults: %v", err)
	}
	// Over links that deliver lines too, GIN peers take the fenced build at
	// every size (auto would choose inline or lines there otherwise).
	p, err := NewPlan(Setup{Cfg: config.Default(), Ranks: 2, Grid: 132, GIN: true, LinesVerified: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tokens := range []int{1, 128} {
		l, err := p.Launch(tokens, tokens)
		if err != nil || l.Variant.Dispatch != ProtoFenced || l.Variant.Combine != ProtoFenced {
			t.Errorf("GIN peers at %d tokens: %+v, %v; want fenced both ways", tokens, l.Variant, err)
		}
	}
}

func TestLaunchGrid(t *testing.T) {
	for _, c := range []struct {
		edit         func(*config.Config)
		grid, tokens int
		want         int
	}{
		{nil, 132, 1, 16}, // inline: 16 blocks per token
		{nil, 132, 2, 32},
		{nil, 132, 3, 132}, // lines or fenced: the set-up's grid
		{nil, 8, 1, 8},     // never more than the set-up's
		{func(c *config.Config) { c.NumBlocks = 132 }, 132, 1, 132},
		{func(c *config.Config) { c.Protocol = config.ProtocolFenced }, 132, 1, 132},
		{func(c *config.Config) { c.Protocol, c.Tokens = config.ProtocolInline, 15 }, 132, 15, 132},
		{func(c *config.Config) { c.Protocol, c.Tokens = config.ProtocolInline, 15 }, 132, 4, 64},
		{func(c *config.Config) { c.Hidden = 128 }, 132, 15, 132}, // auto inline up to 15 tokens of small rows
	} {
		p := plan(t, c.edit, Setup{Grid: c.grid, LinesVerified: true})
		l, err := p.Launch(c.tokens, c.tokens)
		if err != nil {
			t.Fatal(err)
		}
		if l.Grid != c.want {
			t.Errorf("%v, grid %d, %d tokens: launch grid %d, want %d", p.Cfg.Protocol, c.grid, c.tokens, l.Grid, c.want)
		}
	}
	if _, err := plan(t, nil, Setup{}).Launch(129, 129); err == nil {
		t.Error("a launch of more tokens than the plan holds")
	}
	if _, err := plan(t, nil, Setup{}).Launch(64, 65); err == nil {
		t.Error("a rank dispatching more tokens than the launch's")
	}
}

// The entries and shared memory of a launch follow its variant and the
// tokens the rank dispatches; the variant and grid follow the most tokens
// any rank dispatches, so every rank signals alike.
func TestLaunchEntries(t *testing.T) {
	p := plan(t, func(c *config.Config) { c.Protocol = config.ProtocolFenced }, Setup{})
	for _, c := range []struct {
		tokens, own int
		entry       string
	}{{1, 1, DispatchSpreadKernel}, {SpreadTokens - 1, SpreadTokens - 1, DispatchSpreadKernel},
		{SpreadTokens, SpreadTokens, DispatchKernel}, {128, 128, DispatchKernel},
		{128, SpreadTokens - 1, DispatchSpreadKernel}, {128, 0, DispatchSpreadKernel}} {
		l, err := p.Launch(c.tokens, c.own)
		if err != nil {
			t.Fatal(err)
		}
		if l.DispatchEntry != c.entry || l.CombineEntry != CombineKernel || l.Threads != ThreadsPerBlock {
			t.Errorf("%d tokens, %d own: %+v", c.tokens, c.own, l)
		}
		if l.DispatchShared != 8*(256+2) || l.CombineShared != 0 {
			t.Errorf("%d tokens: shared %d/%d bytes", c.tokens, l.DispatchShared, l.CombineShared)
		}
		if l.Variant.Dispatch != ProtoFenced || l.Grid != 132 {
			t.Errorf("%d tokens, %d own: %s on %d blocks", c.tokens, c.own, l.Variant, l.Grid)
		}
	}
	// Lines never spread, whatever the rank's own count.
	l, err := plan(t, nil, Setup{LinesVerified: true}).Launch(128, 3)
	if err != nil {
		t.Fatal(err)
	}
	if l.DispatchEntry != DispatchKernel || l.Variant.Dispatch != ProtoLines {
		t.Errorf("lines, 3 of 128 tokens: %+v", l)
	}
}

// The rank-major layout has its own variants, with the protocols of the
// expert-major ones, and is refused with direct_send.
func TestRankMajorPlan(t *testing.T) {
	rm := func(c *config.Config) { c.Layout = config.RankMajor }
	for _, c := range []struct {
		edit   func(*config.Config)
		lines  bool
		tokens int
		want   string
	}{
		{rm, true, 128, "lines_lines_bf16_rm"},
		{rm, true, 1, "inline_inline_bf16_rm"},
		{rm, false, 128, "fenced_fenced_bf16_rm"},
		{func(c *config.Config) { rm(c); c.DispatchDtype = config.DtypeFP8E4M3 }, true, 128, "fenced_lines_fp8_rm"},
		{func(c *config.Config) { rm(c); c.DispatchDtype = config.DtypeFP8E4M3 }, false, 128, "fenced_fenced_fp8_rm"},
		{func(c *config.Config) {
			rm(c)
			c.Protocol = config.ProtocolLines
			c.DispatchDtype = config.DtypeFP8E4M3
		}, true, 128, "lines_lines_fp8_rm"},
	} {
		l, err := plan(t, c.edit, Setup{LinesVerified: c.lines}).Launch(c.tokens, c.tokens)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.Variant.String(); got != c.want {
			t.Errorf("variant %s, want %s", got, c.want)
		}
		var a Args
		l.Variant.SetArgs(&a)
		if mode := a.Modes >> ModesModeShift & 15; mode != ModeRankMajor {
			t.Errorf("%s: combine mode %d (modes %#x)", c.want, mode, a.Modes)
		}
	}
	c := config.Default()
	c.Layout, c.CombineMode = config.RankMajor, config.DirectSend
	var ue *config.UsageError
	if _, err := NewPlan(Setup{Cfg: c, Ranks: 2, Grid: 132}); !errors.As(err, &ue) || ue.Flag != "--combine-mode" {
		t.Errorf("rank-major with direct_send: %v, want a usage error of --combine-mode", err)
	}
}

// A launch's arguments carry its grid, at every token count (inline
// launches take fewer blocks), and its variant's fields.
func TestLaunchSetArgsGrid(t *testing.T) {
	p := plan(t, nil, Setup{LinesVerified: true})
	grids := map[int]bool{}
	for _, tokens := range []int{1, 2, 15, 16, 128} {
		l, err := p.Launch(tokens, tokens)
		if err != nil {
			t.Fatal(err)
		}
		a := Args{Grid: -1}
		l.SetArgs(&a)
		if a.Grid != int32(l.Grid) || l.Grid < 1 {
			t.Errorf("%d tokens: Grid %d, launch grid %d", tokens, a.Grid, l.Grid)
		}
		var va Args
		l.Variant.SetArgs(&va)
		va.Grid = a.Grid
		if va != a {
			t.Errorf("%d tokens: SetArgs %+v, want the variant's fields %+v", tokens, a, va)
		}
		grids[l.Grid] = true
	}
	if len(grids) < 2 {
		t.Errorf("grids %v: the token counts should give inline and full grids", grids)
	}
}

// The symmetric layout of ep_bench's defaults on two ranks where lines are
// verified, area by area.
func TestSymLayoutOfTheDefaults(t *testing.T) {
	l := plan(t, nil, Setup{LinesVerified: true}).Sym
	// R=2, T=128, H=7168, K=8, E=256; auto: inline up to 2 tokens, lines
	// dispatch and combine above. The dispatch areas have a half per call
	// parity.
	want := []struct {
		name      string
		got, want Area
	}{
		{"dispatch signal", l.DispatchSignal, Area{0, 256}},                    // 8·(R+1) → 256
		{"combine signal", l.CombineSignal, Area{256, 256}},                    //
		{"dispatch recv", l.DispatchRecv, Area{512, 2 * 256 * 14464}},          // 2·R·T messages of 128 + 14336 bytes
		{"dispatch counts", l.DispatchCounts, Area{7406080, 2 * 8 * 256}},      // 2·E {count, epoch}
		{"combine recv", l.CombineRecv, Area{7410176, 1024 * 7168 * 2}},        // max(T·K, R·T) rows
		{"inline dispatch", l.InlineDispatch, Area{22090240, 2 * 256 * 29056}}, // 2·R·T slots (lines) of (24 + H/4) units
		{"inline counts", l.InlineCounts, Area{36966912, 2 * 16 * 256}},        // 2·E units
		{"inline combine", l.InlineCombine, Area{36975104, 1024 * 128 * 128}},  // T·K lines rows of 128 lines
	}
	for _, w := range want {
		if w.got != w.want {
			t.Errorf("%s: %+v, want %+v", w.name, w.got, w.want)
		}
	}
	if l.Total != 36975104+1024*128*128 {
		t.Errorf("total %d", l.Total)
	}
}

// Every area is 256-byte aligned, follows the previous one, and the plan's
// memory is the symmetric buffer and every local buffer.
func TestPlanMemory(t *testing.T) {
	for _, edit := range []func(*config.Config){
		nil,
		func(c *config.Config) { c.Tokens, c.Hidden, c.TopK, c.Experts = 1, 128, 1, 2 },
		func(c *config.Config) {
			c.DispatchDtype, c.CombineMode, c.Reroute, c.CUDAGraph = config.DtypeFP8E4M3, config.DirectSend, 3, true
		},
		func(c *config.Config) { c.Layout, c.NonUniform = config.RankMajor, true },
		func(c *config.Config) {
			c.Layout, c.DispatchTokens, c.DispatchDtype = config.RankMajor, 5, config.DtypeFP8E4M3
		},
	} {
		p := plan(t, edit, Setup{LinesVerified: true, Trace: true})
		l := p.Sym
		next := int64(0)
		for _, a := range []Area{l.DispatchSignal, l.CombineSignal, l.DispatchRecv, l.DispatchCounts, l.CombineRecv, l.InlineDispatch, l.InlineCounts, l.InlineCombine} {
			if a.Off != next || a.Size%256 != 0 {
				t.Errorf("%+v: area %+v after %d", p.Cfg, a, next)
			}
			next += a.Size
		}
		if next != l.Total {
			t.Errorf("total %d, areas %d", l.Total, next)
		}
		c := p.Cfg
		L, R, T, H, K := int64(c.Experts/2), int64(2), int64(c.Tokens), int64(c.Hidden), int64(c.TopK)
		local := 8*R + 2*T*H*2 + L*R*T*H*2 + 4*max(L, R) + 4*L*R*T + 8*L*R + 4*R*T*K + T*H*2 + L*R*T*(H/128)*4 +
			int64(max(c.Reroute, 1))*(T*K*12) + 2*TraceCalls*132*TracePoints*8
		if c.Layout == config.RankMajor { // [R*T] slots, no layout ranges, the slots' top-k
			local += -L*R*T*H*2 + R*T*H*2 - 4*L*R*T + 4*R*T - 8*L*R - L*R*T*(H/128)*4 + R*T*(H/128)*4 + 2*4*R*T*K
		}
		if c.NonUniform || c.DispatchTokens > 0 {
			local += 4 * R
		}
		if c.CUDAGraph {
			local += ClockBytes
		}
		if got := p.Memory(); got != l.Total+local {
			t.Errorf("%+v: memory %d, want %d", c, got, l.Total+local)
		}
	}
}

// The offsets the kernels get are the layout's.
func TestSymLayoutSetArgs(t *testing.T) {
	l := plan(t, nil, Setup{LinesVerified: true}).Sym
	var a Args
	l.SetArgs(&a)
	if a.OffDispatchSignal != 0 || a.OffCombineSignal != 256 || a.OffDispatchRecv != 512 || a.OffDispatchCounts != 7406080 ||
		a.OffCombineRecv != 7410176 || a.OffInlineDispatch != 22090240 || a.OffInlineCounts != 36966912 || a.OffInlineCombine != 36975104 {
		t.Errorf("%+v", a)
	}
}

// token_range (ll.cu) splits a rank's tokens over the grid in 32-bit
// arithmetic: with more tokens than blocks, (b + 1) * T <= T * T must fit in
// an unsigned 32-bit word, which holds while the largest -t does.
func TestTokenRangeProductsFit32Bits(t *testing.T) {
	if uint64(config.MaxTokens)*uint64(config.MaxTokens) >= 1<<32 {
		t.Fatalf("config.MaxTokens = %d: T * T overflows token_range's 32-bit products in ll.cu; divide in 64 bits there first", config.MaxTokens)
	}
}
