package kernels_test

import (
	"slices"
	"testing"

	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/kernels"
)

// Every protocol choice a plan can make has a kernel module, and every
// module is some plan's choice.
func TestEveryPlannedChoiceHasAVariant(t *testing.T) {
	seen := map[kernels.Variant]bool{}
	for _, p := range []config.Protocol{config.ProtocolAuto, config.ProtocolInline, config.ProtocolFenced, config.ProtocolLines} {
		for _, dt := range []config.DispatchDtype{config.DtypeBF16, config.DtypeFP8E4M3} {
			for _, mode := range []string{"rlr", "ds", "rm"} {
				ds := mode == "ds"
				for _, nvlink := range []bool{false, true} {
					for _, gin := range []bool{false, true} {
						for _, hidden := range []int{128, 7168} {
							cfg := config.Default()
							cfg.Protocol, cfg.DispatchDtype, cfg.Hidden, cfg.Tokens = p, dt, hidden, 4096
							if ds {
								cfg.CombineMode = config.DirectSend
							}
							if mode == "rm" {
								cfg.Layout = config.RankMajor
							}
							if p == config.ProtocolInline {
								cfg.Tokens = config.InlineMaxTokens
							}
							plan, err := kernels.NewPlan(kernels.Setup{Cfg: cfg, Ranks: 2, LinesVerified: nvlink, Grid: 132, GIN: gin})
							if gin && (ds || p == config.ProtocolInline || p == config.ProtocolLines) {
								if err == nil {
									t.Fatalf("GIN with protocol %v, direct_send %v was planned", p, ds)
								}
								continue
							}
							if p == config.ProtocolLines && !nvlink {
								if err == nil {
									t.Fatal("--protocol lines without NVLink was planned")
								}
								continue
							}
							if err != nil {
								t.Fatal(err)
							}
							for _, tokens := range []int{1, 2, 3, 15, 16, 128, 4096} {
								if tokens > cfg.Tokens {
									continue
								}
								l, err := plan.Launch(tokens, tokens)
								if err != nil {
									t.Fatalf("protocol %v, %v, direct_send %v, nvlink %v, %d tokens: %v", p, dt, ds, nvlink, tokens, err)
								}
								if l.Variant.GIN != gin || (gin && (l.Variant.Dispatch != kernels.ProtoFenced || l.Variant.Combine != kernels.ProtoFenced)) {
									t.Fatalf("GIN %v planned %v", gin, l.Variant)
								}
								seen[l.Variant] = true
							}
						}
					}
				}
			}
		}
	}
	if len(seen) != len(kernels.Variants()) {
		t.Errorf("the plans reach %d of the %d variants built: a PTX file no launch uses", len(seen), len(kernels.Variants()))
	}
}

func TestBuiltRefusesAnUnbuiltPair(t *testing.T) {
	if err := kernels.Built(kernels.Variant{Dispatch: kernels.ProtoLines, Combine: kernels.ProtoFenced}); err == nil {
		t.Fatal("a lines dispatch with a fenced combine has no module, yet was chosen")
	}
}

// The inline protocol's limit in config fits the kernels: every inline
// operation spreads (fewer than SpreadTokens tokens), and its table of
// selections (kWorkers entries in ll.cu) holds every token's top-k at the
// largest top-k the kernels take (32).
func TestInlineLimitFitsTheKernels(t *testing.T) {
	if config.InlineMaxTokens >= kernels.SpreadTokens {
		t.Fatalf("config.InlineMaxTokens %d, kernels spread below %d tokens", config.InlineMaxTokens, kernels.SpreadTokens)
	}
	if workers := kernels.ThreadsPerBlock - 32; config.InlineMaxTokens*32 > workers {
		t.Fatalf("%d tokens of 32 selections do not fit a table of %d", config.InlineMaxTokens, workers)
	}
}

// The dispatch entry follows spreads() in ll.cu: inline always, fenced below
// SpreadTokens tokens, lines never; and every inline operation config allows
// is one the spread entry takes.
func TestSpreads(t *testing.T) {
	for _, c := range []struct {
		proto  int32
		tokens int
		want   bool
	}{
		{kernels.ProtoInline, 1, true}, {kernels.ProtoInline, config.InlineMaxTokens, true},
		{kernels.ProtoFenced, 1, true}, {kernels.ProtoFenced, kernels.SpreadTokens - 1, true},
		{kernels.ProtoFenced, kernels.SpreadTokens, false}, {kernels.ProtoFenced, 128, false},
		{kernels.ProtoLines, 1, false}, {kernels.ProtoLines, 128, false},
	} {
		v := kernels.Variant{Dispatch: c.proto, Combine: c.proto}
		if got := v.Spreads(c.tokens); got != c.want {
			t.Errorf("%s dispatch of %d tokens: spreads %v, want %v", kernels.ProtoNames[c.proto], c.tokens, got, c.want)
		}
	}
}

// Every dispatch a variant can be asked for finds its entry in the module.
func TestDispatchEntryIsInTheModule(t *testing.T) {
	for _, v := range kernels.Variants() {
		most := 4096
		if v.Dispatch == kernels.ProtoInline {
			most = config.InlineMaxTokens
		}
		for tokens := 0; tokens <= most; tokens++ { // a rank may dispatch none (-N)
			if e := v.DispatchEntry(tokens); !slices.Contains(v.Entries(), e) {
				t.Fatalf("%s at %d tokens: entry %s, the module has %v", v.Module(), tokens, e, v.Entries())
			}
		}
	}
}
