// The LL dispatch kernel. ll.cu includes this file once per dispatch entry,
// with EPBENCH_DISPATCH_ENTRY (the entry's name) and EPBENCH_SPREAD (1 when
// the entry sends its rows spread over the grid, spreads() in ll.cu; else 0)
// defined, so each entry carries only its own send path. The body is written
// in the entry itself, not in a device function the entries call: built that
// way with CUDA 13 the lines dispatch came out 264 SASS instructions longer
// and 0.45 us slower at 128 tokens on one H200 (docs/PERF.md, kernels v17).
#if !defined(EPBENCH_DISPATCH_ENTRY) || !defined(EPBENCH_SPREAD)
#error "ll.cu includes ll_dispatch.cuh with EPBENCH_DISPATCH_ENTRY and EPBENCH_SPREAD defined"
#endif

extern "C" __global__ void __launch_bounds__(kThreads, 1) EPBENCH_DISPATCH_ENTRY(const LLArgs args) {
    if (!variant_ok(args, EPBENCH_SPREAD)) return;
    const LLArgs a = clocked(args, true);
    jitter(a, true);
    // Dynamic shared memory: two int arrays of E entries, then two of R
    // (DispatchSharedBytes).
    extern __shared__ int dyn[];
    __shared__ int dests[kMaxTopK];      // the current token's destination peers
    __shared__ int64_t own_rows[kMaxTopK];  // its rows in the own rank's recv (rank-major: its slot)
    __shared__ int ndest, nown;
    __shared__ uint64_t peer_base[kMaxRanks];
    __shared__ int64_t rows[kMaxTopK];  // rows of the message being received
    __shared__ int nrows;
    __shared__ int waited_upto;  // sources of order 1..waited_upto-1 have arrived
    __shared__ int failed;
    __shared__ int src_masked[2];  // fenced receive, -T: the current message's source is masked (by iteration parity)
    __shared__ float gamax[16384 / kScaleBlock];  // lines, FP8: each channel group's largest magnitude
    __shared__ int lhdr[2 + 3 * kMaxTopK];        // lines: the header being sent
    // Spread (this rank sends fewer than kSpreadTokens tokens, so own * K <=
    // kWorkers): every selection's expert, and its place among the rows from
    // here that its destination receives (expert-major: its expert's rows;
    // rank-major: the slots of the tokens sent to its rank).
    __shared__ int sel_e[kWorkers], sel_p[kWorkers];

    const uint64_t deadline = global_timer() + a.timeout_ns;
    EPBENCH_TRACE(a, 0);
    const int R = a.ranks, T = a.tokens, H = a.hidden, K = a.topk, L = a.local_experts, E = R * L;
    const int own = a.own_tokens;  // the tokens sent (T: the slots' stride)
    const bool rm = rank_major(a);
    int* const before = dyn;     // selections of each expert by this rank's tokens before the current one
    int* const total = dyn + E;  // selections of each expert by all this rank's tokens
    // Rank-major: tokens of this rank sent to each rank before the current
    // one, and in all.
    int* const before_r = dyn + 2 * E;
    int* const total_r = dyn + 2 * E + R;
    const int vec_per_row = H / 8;  // uint4 = 8 bf16
    const int hdr = header_bytes(K), msg = message_bytes(K, H);
    const int rb = row_bytes(H, arg_fp8(a)), groups = H / kScaleBlock;
    const uint64_t self = a.peers[a.rank];
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const int lo = a.rank * L, hi = lo + L;
    const int64_t rows_per_expert = (int64_t)R * T;
    uint8_t* const recv = reinterpret_cast<uint8_t*>(a.recv_x);
    int t0, t1;
    token_range(own, t0, t1);

    const bool inl = arg_dispatch_proto(a) == kProtoInline, lines = arg_dispatch_proto(a) == kProtoLines;
    // This thread's peer's base (one a thread: R <= kMaxRanks <= kThreads).
    // Lines and the spread entry (inline always spreads) load it first, so
    // that its round trip overlaps the loads issued below, and store it to
    // shared memory after them and the zeroing, where the store's wait holds
    // up nothing else before the first barrier. The fenced entry that does
    // not spread loads it after the routing's loads, as before: loaded first
    // there, its store waited ~4 % of the kernel's samples and the entry was
    // ~0.1 us slower again at 128 tokens. (With v42's code in that entry the
    // fenced dispatch is still ~0.1 us slower than v42's, for reasons outside
    // it: docs/PERF.md, kernels v43; about half comes with the spread
    // entry's change, kernels v44's c9.) To be timed again, and dropped if
    // it no longer pays, once that module effect is understood.
    static_assert(kMaxRanks <= kThreads, "one peer base a thread");
    const bool peer_first = lines || EPBENCH_SPREAD != 0;
    const uint64_t my_peer = peer_first && (int)threadIdx.x < R ? a.peers[threadIdx.x] : 0;
    // The block's first token row is loaded along with the routing below:
    // thread i holds vectors i, i + kThreads, ... of the row. Lines reads the
    // row again as its lines go out, so the row's 128-byte lines are brought
    // into L1 as well, one per thread (BF16 lines never uses the registers,
    // and the compiler drops their loads).
    // Lane k of warp 0 holds the token's k-th expert id and weight.
    uint4 xv[kMaxVecPerThread];
    int64_t tok_e = -1;
    float tok_w = 0.f;
    auto load_x = [&](int t) {
        const uint4* src = reinterpret_cast<const uint4*>(a.x + (int64_t)t * H);
        if (lines && threadIdx.x * 128 < H * 2)
            asm volatile("prefetch.global.L1 [%0];" ::"l"(reinterpret_cast<const uint8_t*>(src) + threadIdx.x * 128));
#pragma unroll
        for (int i = 0; i < kMaxVecPerThread; i++) {
            const int v = threadIdx.x + i * kThreads;
            if (v < vec_per_row) xv[i] = __ldg(src + v);
        }
        if (threadIdx.x < K) {
            tok_e = __ldg(a.topk_idx + (int64_t)t * K + threadIdx.x);
            tok_w = __ldg(a.topk_w + (int64_t)t * K + threadIdx.x);
        }
    };
    // Spread, the rows leave from many SMs (see the send pass), so the block
    // holds no row.
    // spreads(arg_dispatch_proto(a), own), which variant_ok checked. Not const: the
    // optimizer still drops the other path, and the front end does not call
    // the path after the spread one's return unreachable in the spread entry.
    bool spread = EPBENCH_SPREAD != 0;
    if (t0 < t1 && !spread) load_x(t0);
    // The first token's routing, for its header: the fenced send loop loads
    // the next tokens' over tok_e and tok_w.
    const int64_t first_e = tok_e;
    const float first_w = tok_w;

    // Destinations of a token (warp 0, lane k holding its k-th expert): the
    // distinct peers, each named by the lowest lane that selects it, into
    // dests/ndest. Returns the lane's rank (-1 for none).
    auto find_dests = [&](int64_t e) {
        const int q = rank_of(e, E, L);
        const unsigned same = __match_any_sync(0xffffffffu, q);
        const bool lead = q >= 0 && !direct_self(a, q) && (__ffs(same) - 1) == lane && !masked(a.active, q);
        const unsigned leads = __ballot_sync(0xffffffffu, lead);
        if (lead) dests[__popc(leads & ((1u << lane) - 1u))] = q;
        if (lane == 0) ndest = __popc(leads);
        return q;
    };
    // Rank-major: slot `slot`'s token, top-k (lane k: local expert or -1)
    // and weights (warp-collective; lane k < K holds selection k).
    auto record_slot = [&](int64_t slot, int t, int local, float w) {
        if (lane < K) {
            a.recv_topk_idx[slot * K + lane] = local;
            a.recv_topk_w[slot * K + lane] = w;
        }
        if (lane == 0) a.src_info[slot] = t;
    };
    auto slot_at = [&](int q, int t) {
        return at<uint8_t>(peer_base[q], a.off_dispatch_recv) + slot_index(a, a.rank, t) * (uint64_t)msg;
    };
    const uint32_t flag = (uint32_t)a.epoch;
    const uint64_t flag64 = flag;  // lines
    const int p0 = inline_payload_unit(K);  // inline: the row's first unit in a slot
    auto islot_at = [&](int q, int t) { return inline_slot(a, peer_base[q], a.rank, t); };
    const int sub = threadIdx.x % 16;                               // lane in its half-warp
    const unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;  // the half-warp
    // Vector v of token t's row (val; FP8: q8, and its channel group's scale
    // from the half-warp's first lane) into the token's message to peer q:
    // fenced past the header, inline as flagged units.
    auto put_peer_vec = [&](int q, int t, int v, const uint4& val, const uint2& q8, float scale) {
        if (!arg_fp8(a)) {
            if (inl) vec_store(islot_at(q, t) + p0 + 2 * v, val, flag);
            else reinterpret_cast<uint4*>(slot_at(q, t) + hdr)[v] = val;
        } else if (inl) {
            uint4* m8 = islot_at(q, t) + p0;
            unit_store(m8 + v, q8.x, q8.y, flag);
            if (sub == 0) unit_store(m8 + H / 8 + v / 16, __float_as_uint(scale), 0, flag);
        } else {
            uint8_t* m8 = slot_at(q, t) + hdr;
            reinterpret_cast<uint2*>(m8)[v] = q8;
            if (sub == 0) reinterpret_cast<float*>(m8 + H)[v / 16] = scale;
        }
    };
    // The same vector into row `row` of this rank's recv (FP8: the scale
    // into recv_scales).
    auto put_own_vec = [&](int64_t row, int v, const uint4& val, const uint2& q8, float scale) {
        if (!arg_fp8(a)) {
            reinterpret_cast<uint4*>(recv + row * rb)[v] = val;
        } else {
            reinterpret_cast<uint2*>(recv + row * rb)[v] = q8;
            if (sub == 0) a.recv_scales[row * groups + v / 16] = scale;
        }
    };

    // The counters are zeroed while the first round of topk_idx is loaded.
    const int n_ids = own * K, nb = t0 * K;
    int64_t ids[4];
    auto load4 = [&](int i0) {
#pragma unroll
        for (int u = 0; u < 4; u++) ids[u] = i0 + u * kThreads < n_ids ? __ldg(a.topk_idx + i0 + u * kThreads) : -1;
    };
    auto count4 = [&](int i0) {
#pragma unroll
        for (int u = 0; u < 4; u++) {
            if (ids[u] < 0 || ids[u] >= E) continue;
            atomicAdd(&total[ids[u]], 1);
            if (i0 + u * kThreads < nb) atomicAdd(&before[ids[u]], 1);
        }
    };
    load4(threadIdx.x);
    if (!peer_first && (int)threadIdx.x < R) peer_base[threadIdx.x] = a.peers[threadIdx.x];
    for (int e = threadIdx.x; e < 2 * (E + R); e += kThreads) dyn[e] = 0;
    if (threadIdx.x == 0) {
        failed = 0;
        waited_upto = 1;
    }
    // After the routing's loads are issued and the counters zeroed: a store
    // to shared memory waits for its load.
    if (peer_first && (int)threadIdx.x < R) peer_base[threadIdx.x] = my_peer;
    const int nhl = lines_header_lines(K), nrl = lines_row_lines(H, arg_fp8(a));
    // The current token's own-rank rows into own_rows and nown, from each
    // lane's selection: `mine` (on this rank) and its row in recv (rank-major:
    // the token's slot, the same in every such lane). Warp-collective.
    auto keep_own = [&](bool mine, int64_t row) {
        const unsigned mines = __ballot_sync(0xffffffffu, mine);
        if (rm) {  // one slot per token
            if (mine && lane == __ffs(mines) - 1) own_rows[0] = row;
        } else if (mine) {
            own_rows[__popc(mines & ((1u << lane) - 1u))] = row;
        }
        if (lane == 0) nown = rm ? mines != 0 : __popc(mines);
    };
    // --- the headers (warp 0), with the row of every selection in its
    // expert's rows from here (tokens in order; spread: the places counted
    // before the send pass, which the headers then precede); `held`: the
    // selections are he and hw, loaded by load_x. Lines, and the non-spread
    // fenced path's first token: also the token's own-rank rows (own_rows,
    // nown), which the send pass (lines) or the workers (fenced) write ---
    auto headers_of = [&](int t, bool held, int64_t he, float hw) {
        // Experts within a token are distinct, so the lanes of one token
        // never share a counter.
        int64_t e = -1;
        float w = 0.f;
        if (held) {
            e = he;
            w = hw;
        } else if (lane < K) {
            e = __ldg(a.topk_idx + (int64_t)t * K + lane);
            w = __ldg(a.topk_w + (int64_t)t * K + lane);
        }
        const int q = find_dests(e);
        int p = 0;
        if (rm) {
            // The token's place among those sent to q: spread, counted before
            // the send pass; else taken by the lowest lane of each rank and
            // shared with that rank's other lanes.
            if (spread) {
                if (lane < K) p = sel_p[t * K + lane];
            } else {
                const int leader = __ffs(__match_any_sync(0xffffffffu, q)) - 1;
                if (q >= 0 && lane == leader) {
                    p = before_r[q];
                    before_r[q] = p + 1;
                }
                p = __shfl_sync(0xffffffffu, p, leader);
            }
            const unsigned here = __ballot_sync(0xffffffffu, q >= 0 && direct_self(a, q));
            if (here != 0) {
                const int64_t slot = (int64_t)a.rank * T + __shfl_sync(0xffffffffu, p, __ffs(here) - 1);
                record_slot(slot, t, q == a.rank ? (int)(e - lo) : -1, w);
                if (q == a.rank) a.row_pos[((int64_t)a.rank * T + t) * K + lane] = (int)slot;
            }
        } else if (spread) {
            if (lane < K) p = sel_p[t * K + lane];
        } else if (q >= 0) {
            p = before[e];
            before[e] = p + 1;
        }
        if (!rm && q >= 0 && direct_self(a, q)) {
            a.src_info[(e - lo) * rows_per_expert + p] = t;
            a.row_pos[((int64_t)a.rank * T + t) * K + lane] = p;
        }
        if (lines || (!spread && t == t0))
            keep_own(q >= 0 && direct_self(a, q), recv_row(a, (int)(e - lo), rm ? a.rank * T + p : p));
        __syncwarp();
        if (lines) {
            // The header to every peer; `present` tells whether the row comes.
            if (lane < K) {
                lhdr[2 + lane] = (int)e;
                lhdr[2 + K + lane] = __float_as_int(w);
                lhdr[2 + 2 * K + lane] = p;
            }
            if (lane == 0) lhdr[1] = t;
            __syncwarp();
            const int ln = lane / 8, part = lane % 8;
            for (int r = 0; r < R; r++) {
                if (direct_self(a, r) || masked(a.active, r)) continue;
                bool sent = false;
                for (int i = 0; i < ndest; i++) sent |= dests[i] == r;
                if (ln >= nhl) continue;
                uint32_t c[4] = {};
#pragma unroll
                for (int j = 0; j < 4 && part < 7; j++) {
                    const int i = ln * 2 * kLineWords + 4 * part + j;
                    c[j] = i == 0 ? (sent ? 1u : 0u) : i < 2 + 3 * K ? (uint32_t)lhdr[i] : 0u;
                }
                line_part_store(islot_at(r, t) + ln * 8 + part, part, (uint64_t)c[1] << 32 | c[0],
                                part == 7 ? flag64 : (uint64_t)c[3] << 32 | c[2]);
            }
            __syncwarp();  // lhdr is rewritten for the next token
        }
        for (int i = 0; i < ndest && !lines; i++) {
            if (inl) {
                uint4* m = islot_at(dests[i], t);
                if (lane < K) {
                    unit_store(m + 1 + lane, (uint32_t)e, p, flag);
                    unit_store(m + 1 + K + lane, __float_as_uint(w), 0, flag);
                }
                continue;
            }
            int* mh = reinterpret_cast<int*>(slot_at(dests[i], t));
            if (lane == 0) {
                mh[0] = a.epoch;
                mh[1] = t;
            }
            if (lane < K) {
                hdr_ids(mh)[lane] = (int)e;
                hdr_w(mh, K)[lane] = w;
                hdr_pos(mh, K)[lane] = p;
            }
        }
        // Inline: every peer learns whether the token comes to it.
        for (int r = lane; inl && r < R; r += kWarp) {
            if (direct_self(a, r) || masked(a.active, r)) continue;
            bool sent = false;
            for (int i = 0; i < ndest; i++) sent |= dests[i] == r;
            unit_store(islot_at(r, t), sent ? 1u : 0u, 0, flag);
        }
        __syncwarp();  // dests is rewritten for the next token
    };
    // Spread: every selection's expert (-1 outside [0, E)), then its place
    // among the rows from this rank that its destination receives
    // (expert-major: the earlier tokens that select the expert; rank-major:
    // the earlier tokens that select a rank's expert, the selection's rank),
    // so that the headers go out before the send pass and the send pass
    // writes the own rank's rows from the registers that hold them for the
    // peers. The counts (total, total_r) are taken here too, so nothing is
    // left to count after the send pass.
    if (spread && threadIdx.x < n_ids) sel_e[threadIdx.x] = expert_or_none(ids[0], E);
    __syncthreads();
    if (spread) {
        if (threadIdx.x < n_ids) {
            const int i = threadIdx.x, e = sel_e[i];
            int p = 0;
            if (e >= 0) atomicAdd(&total[e], 1);
            if (!rm) {
                for (int j = 0; j < i / K * K; j++) p += sel_e[j] == e;
            } else if (e >= 0) {
                const int qlo = e / L * L;  // the selection's rank's first expert
                auto same_rank = [&](int j) { return sel_e[j] >= qlo && sel_e[j] < qlo + L; };
                for (int u = 0; u < i / K; u++) {
                    bool h = false;
                    for (int k = 0; k < K; k++) h = h || same_rank(u * K + k);
                    p += h;
                }
                // The token counts once for the rank, by its lowest
                // selection there.
                bool first = true;
                for (int k = i / K * K; k < i; k++) first = first && !same_rank(k);
                if (first) atomicAdd(&total_r[e / L], 1);
            }
            sel_p[i] = p;
        }
        __syncthreads();
    }
    // Spread: the headers (warp 0, below) need only the places counted
    // above, so they go out before the send pass, while the other warps'
    // rows are loaded.
    if (spread && warp == 0)
        for (int t = t0; t < t1; t++) headers_of(t, false, -1, 0.f);

    // --- the rows to the peers before the count (spread: after it, as the
    // own rank's rows, written beside them, need the places it gives): they
    // need only the destinations, and stream over NVLink while the blocks
    // count. One SM stores only ~20 GB/s over NVLink, so for fewer than
    // kSpreadTokens tokens the rows are spread over the grid 16 vectors (one
    // FP8 scale group) at a time (group c of all tokens' rows goes to block
    // c % grid); otherwise each block sends its own tokens from the
    // registers that already hold them ---
    const int row_groups = vec_per_row / 16, all_groups = own * row_groups;
    // Blocks that store (and take a ticket); block 0 takes one even without
    // tokens, so a rank without tokens still releases its peers.
    const int stored_blocks = max(1, min((int)gridDim.x, spread ? all_groups : own));
    // Half-warp j takes groups j * grid + block, ...: counted from warp 1, so
    // warp 0, which has written the headers first, has the last two.
    const int send_j = (threadIdx.x + kThreads - kWarp) % kThreads / 16;
    for (int c = send_j * gridDim.x + blockIdx.x; spread && c < all_groups; c += (kThreads / 16) * gridDim.x) {
        const int t = c / row_groups, v = (c % row_groups) * 16 + sub;
        const uint4 val = __ldg(reinterpret_cast<const uint4*>(a.x + (int64_t)t * H) + v);
        // The token's peers: lane `sub` of the half-warp takes selections
        // sub and sub + 16 (all K), each a peer or -1 (none, or the own
        // rank, whose rows are written after the sends).
        int qs[2];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int e = sub + 16 * j < K ? sel_e[t * K + sub + 16 * j] : -1;
            qs[j] = e >= 0 && e / L != a.rank ? e / L : -1;
        }
        uint2 q8;
        float scale = 0.f;
        if (arg_fp8(a)) q8 = quantize8(val, half, &scale);
        // Each peer once: the lowest selection left names it, then every
        // selection of that peer is taken off (the half-warp's ballots, each
        // and-ed with `half`: a ballot also sets the bits of the other
        // half's lanes when they run it at the same time, with their mask).
        unsigned left0 = __ballot_sync(half, qs[0] >= 0) & half, left1 = __ballot_sync(half, qs[1] >= 0) & half;
        while (left0 | left1) {
            const int q = __shfl_sync(half, left0 ? qs[0] : qs[1], __ffs(left0 ? left0 : left1) - 1);
            left0 &= ~(__ballot_sync(half, qs[0] == q) & half);
            left1 &= ~(__ballot_sync(half, qs[1] == q) & half);
            if (!masked(a.active, q)) put_peer_vec(q, t, v, val, q8, scale);
        }
        // The own rank's rows of the token (rank-major: its slot, once).
        for (int k = 0; k < K; k++) {
            const int e = sel_e[t * K + k];
            if (e < lo || e >= hi) continue;
            put_own_vec(recv_row(a, e - lo, rm ? a.rank * T + sel_p[t * K + k] : sel_p[t * K + k]), v, val, q8, scale);
            if (rm) break;
        }
    }
    if (spread) EPBENCH_TRACE_BY(a, 6, kWarp);  // the send pass wrote the own rank's rows
    for (int t = t0; !spread && !lines && t < t1; t++) {
        if (warp == 0) find_dests(tok_e);
        __syncthreads();
        const int nd = ndest;
#pragma unroll
        for (int u = 0; u < kMaxVecPerThread && nd > 0; u++) {  // nd: block-uniform
            const int v = threadIdx.x + u * kThreads;
            if (v >= vec_per_row) break;
            uint2 q8;
            float scale = 0.f;
            if (arg_fp8(a)) q8 = quantize8(xv[u], half, &scale);  // a half-warp holds 128 channels
            for (int i = 0; i < nd; i++) put_peer_vec(dests[i], t, v, xv[u], q8, scale);  // fenced
        }
        __syncthreads();  // dests is rewritten for the next token
        if (t + 1 < t1) load_x(t + 1);
    }
    EPBENCH_TRACE(a, 5);

    // --- count every expert's selections (every block counts all of
    // topk_idx, so no grid-wide step is needed; spread: counted above) ---
    if (!spread) count4(threadIdx.x);
    for (int i0 = threadIdx.x + 4 * kThreads; !spread && i0 < n_ids; i0 += 4 * kThreads) {
        load4(i0);
        count4(i0);
    }
    // Rank-major: the tokens sent to each rank, 32/K tokens per warp at a
    // time (lane j holds selection j % K of the warp's token j / K; the
    // lowest lane of each (token, rank) counts the token).
    const int per_warp = kWarp / K;
    for (int base = warp * per_warp; rm && !spread && base < own; base += kWarps * per_warp) {
        const int tk = base + lane / K;
        const int64_t e = lane < per_warp * K && tk < own ? __ldg(a.topk_idx + (int64_t)tk * K + lane % K) : -1;
        const int q = rank_of(e, E, L);
        const unsigned same = __match_any_sync(0xffffffffu, q < 0 ? -1 - lane : tk * R + q);
        if (q >= 0 && lane == __ffs(same) - 1) {
            atomicAdd(&total_r[q], 1);
            if (tk < t0) atomicAdd(&before_r[q], 1);
        }
    }
    if (!spread) __syncthreads();
    // Every peer learns how many rows each of its experts gets from here.
    if (blockIdx.x == 0) {
        for (int q = 0; q < R; q++) {
            if (direct_self(a, q) || masked(a.active, q)) continue;
            int2* c = at<int2>(peer_base[q], a.off_dispatch_counts) + count_index(a, a.rank);
            uint4* ic = at<uint4>(peer_base[q], a.off_inline_counts) + count_index(a, a.rank);
            // Rank-major: one count, the tokens sent to q.
            for (int l = threadIdx.x; l < (rm ? 1 : L); l += kThreads) {
                const int n = rm ? total_r[q] : total[q * L + l];
                if (inl || lines) unit_store(ic + l, n, 0, flag);
                else c[l] = make_int2(n, a.epoch);  // one 8-byte store
            }
        }
    }

    if (warp == 0 && !lines && !spread)
        for (int t = t0; t < t1; t++) headers_of(t, t == t0, first_e, first_w);
    // Lines: words w and w + 1 of a row as its lines carry them (d0, d1),
    // into row r of this rank's recv, for an own token's row or a received
    // one (FP8: past the E4M3 data, the scales into recv_scales).
    auto put_line_words = [&](int64_t r, int w, uint64_t d0, uint64_t d1) {
        const uint4 val = make_uint4((uint32_t)d0, (uint32_t)(d0 >> 32), (uint32_t)d1, (uint32_t)(d1 >> 32));
        if (w < (arg_fp8(a) ? H / 8 : H / 4)) {
            reinterpret_cast<uint4*>(recv + r * rb)[w / 2] = val;
        } else if (arg_fp8(a)) {
            const int g = 2 * (w - H / 8);
            const uint32_t sc[4] = {val.x, val.y, val.z, val.w};
#pragma unroll
            for (int j = 0; j < 4; j++)
                if (g + j < groups) a.recv_scales[r * groups + g + j] = __uint_as_float(sc[j]);
        }
    };
    // Lines: each token's header goes first, so the receiver knows where its
    // rows go while they stream in; then every warp stores the row's lines
    // to the peers and, as they pass, their data into the own rank's rows
    // (the row read once, from the L1 that load_x filled, by all sixteen
    // warps).
    for (int t = t0; lines && t < t1; t++) {
        if (warp == 0) headers_of(t, true, tok_e, tok_w);
        if (arg_fp8(a)) {
#pragma unroll
            for (int u = 0; u < kMaxVecPerThread; u++) {
                const int v = threadIdx.x + u * kThreads;
                if (v >= vec_per_row) break;  // half-warp uniform: 16 | vec_per_row for FP8
                float f[8];
                unpack8(xv[u], f);
                const float amax = group_amax(f, half);
                if (sub == 0) gamax[v / 16] = amax;
            }
        }
        __syncthreads();
        const int nd = ndest, no = nown;
        const uint64_t* xw = reinterpret_cast<const uint64_t*>(a.x + (int64_t)t * H);
        // The FP8 row's data word w as it travels.
        auto word = [&](int w) -> uint64_t {
            if (w < H / 8) {
                float f[8];
                unpack8(__ldg(reinterpret_cast<const uint4*>(xw) + w), f);
                const uint2 q = e4m3x8(f, gamax[w / 16]);
                return (uint64_t)q.y << 32 | q.x;
            }
            const int g = 2 * (w - H / 8);
            const float s0 = g < groups ? __fdiv_rn(gamax[g], 448.f) : 0.f;
            const float s1 = g + 1 < groups ? __fdiv_rn(gamax[g + 1], 448.f) : 0.f;
            return (uint64_t)__float_as_uint(s1) << 32 | __float_as_uint(s0);
        };
        for (int q4 = warp; 4 * q4 < nrl; q4 += kWarps) {
            __syncwarp();
            const int ln = 4 * q4 + lane / 8;
            const int w = ln < nrl ? line_word(ln) : -1;
            uint64_t d0 = 0, d1 = flag64;  // part 7
            if (w >= 0 && !arg_fp8(a)) {
                // 16 bytes of the row (w is even, H / 4 too)
                const uint4 v = w < H / 4 ? __ldg(reinterpret_cast<const uint4*>(xw) + w / 2) : make_uint4(0, 0, 0, 0);
                d0 = (uint64_t)v.y << 32 | v.x;
                d1 = (uint64_t)v.w << 32 | v.z;
            } else if (w >= 0) {
                d0 = word(w);
                d1 = word(w + 1);
            }
            if (ln < nrl)
                for (int i = 0; i < nd; i++) line_part_store(islot_at(dests[i], t) + (nhl + ln) * 8 + lane % 8, lane % 8, d0, d1);
            // A convergent barrier, reached by every lane, between the line
            // stores and the per-lane branch below: the eight lanes of a line
            // must store it in one instruction, which splitting the loop by
            // that branch would undo.
            __syncwarp();
            for (int i = 0; i < no && w >= 0; i++) put_line_words(own_rows[i], w, d0, d1);
        }
        __syncthreads();  // dests, own_rows and gamax are rewritten for the next token
        if (t + 1 < t1) load_x(t + 1);
    }
    __syncthreads();
    EPBENCH_TRACE(a, 1);
    if (lines) EPBENCH_TRACE(a, 6);  // the send pass wrote the own rank's rows
    // Warp 0 takes the block's ticket and, if last, releases the peers; then
    // it is done. The own rank's rows are not part of the release: fenced
    // with more tokens, the workers write them while the peers' data is on
    // its way, then go on to the receive side (lines and spread: the send
    // pass wrote them).
    if (warp == 0) {
#if EPBENCH_GIN
        // GIN peers (ll_gin.cuh): the messages of tokens [from, to) and,
        // with counts, the counts go from their mirrors, one put each per
        // peer: a block's own tokens' as soon as they are stored, or with
        // the rows spread over the grid, every token's by the block that
        // takes the last ticket (which has acquired every block's stores).
        bool put = false;
        auto gin_puts = [&](int from, int to, bool counts) {
            for (int q = lane; q < R; q += kWarp) {
                if (direct_self(a, q) || masked(a.active, q) || !gin_peer(q)) continue;
                gin_put(q, a.off_dispatch_recv + slot_index(a, a.rank, from) * msg, (uint64_t)(to - from) * msg);
                if (counts)
                    gin_put(q, a.off_dispatch_counts + count_index(a, a.rank) * sizeof(int2),
                            (uint64_t)(rm ? 1 : L) * sizeof(int2));
                put = true;
            }
        };
        if (!spread && (int)blockIdx.x < stored_blocks) gin_puts(t0, t1, blockIdx.x == 0);
        // Lane q % 32 posts the puts to peer q, lane 0 takes the ticket: the
        // puts must be in their queues before it, so that the last block's
        // signal comes after them there (a strong signal settles only the
        // puts before it).
        __syncwarp();
#endif
        if (!inl && !lines && (int)blockIdx.x < stored_blocks &&
            last_ticket(at<uint64_t>(self, a.off_dispatch_signal) + R, stored_blocks)) {
#if EPBENCH_GIN
            if (spread) gin_puts(0, own, true);
#endif
            release_peers(a, peer_base, a.off_dispatch_signal);
            EPBENCH_TRACE(a, 2);
        }
#if EPBENCH_GIN
        if (put) gin_flush();  // the next calls write the mirrors again
#endif
        return;
    }
    const int wt = threadIdx.x - kWarp;

    // --- fenced: the own rank's rows (workers), at the rows warp 0 chose:
    // the first token's from shared memory, the others' (more tokens than
    // blocks) from row_pos (lines wrote them in the send pass, spread
    // above) ---
    for (int t = t0; !lines && !spread && t < t1; t++) {
        if (warp == 1 && t > t0) {
            int64_t e = -1;
            if (lane < K) e = __ldg(a.topk_idx + (int64_t)t * K + lane);
            const bool mine = e >= lo && e < hi;
            const int pos = mine ? a.row_pos[((int64_t)a.rank * T + t) * K + lane] : 0;
            keep_own(mine, recv_row(a, (int)(e - lo), pos));
        }
        workers_sync();
        const uint4* src = reinterpret_cast<const uint4*>(a.x + (int64_t)t * H);
        const int no = nown;
        // The loop over the token's rows is kept rolled here and on the
        // receive side: unrolled, it made the fenced dispatch entry 1.5 to 1.7
        // times as long, code that a launch after another kernel fetches
        // again from the second level of the instruction caches
        // (docs/PERF.md, kernels v39). A row (hidden <= 16384) fits one pass
        // of kMaxRecvVecPerThread vectors per worker.
        uint4 xr[kMaxRecvVecPerThread];
#pragma unroll
        for (int u = 0; u < kMaxRecvVecPerThread; u++) {
            const int v = wt + u * kWorkers;
            if (v < vec_per_row) xr[u] = __ldg(src + v);
        }
#pragma unroll
        for (int u = 0; u < kMaxRecvVecPerThread; u++) {
            const int v = wt + u * kWorkers;
            if (v >= vec_per_row) break;  // half-warp uniform: 16 | vec_per_row for FP8
            uint2 q8;
            float scale = 0.f;
            if (arg_fp8(a)) q8 = quantize8(xr[u], half, &scale);  // a half-warp holds 128 channels
#pragma unroll 1
            for (int i = 0; i < no; i++) put_own_vec(own_rows[i], v, xr[u], q8, scale);
        }
        workers_sync();  // own_rows is rewritten for the next token
    }
    if (!lines && !spread) EPBENCH_TRACE_BY(a, 6, kWarp);


    // --- peers: the workers copy the messages this block owns (one per
    // source token, sources in order from rank+1) to the rows their headers
    // name; the last block also writes the layout ---
    const int2* counts = at<const int2>(self, a.off_dispatch_counts);
    const uint4* icounts = at<const uint4>(self, a.off_inline_counts);
    const uint64_t* arrived = at<const uint64_t>(self, a.off_dispatch_signal);
    // Waits (first worker) for the sources of order below `upto` (inline:
    // nothing to wait for, every datum is polled).
    auto wait_sources = [&](int upto) {
        if (wt == 0 && !inl && !lines) {
            for (int o = waited_upto; o < upto && !failed; o++) {
                const int p = (a.rank + o) % R;
                // A masked source (-T) is waited for no longer.
                if (!wait_arrivals(arrived + p, a.expect, deadline, a.err, a.active, kPhaseDispatch, p) &&
                    !masked(a.active, p))
                    failed = 1;
                else
                    waited_upto = o + 1;
            }
        }
    };
    // The number of rows local expert l gets from source s (false: gave up).
    auto count_of = [&](int s, int l, int* c) {
        if (direct_self(a, s)) {
            *c = rm ? total_r[a.rank] : total[lo + l];
            return true;
        }
        if (masked(a.active, s)) {  // -T: a masked source counts nothing
            *c = 0;
            return true;
        }
        if (!inl && !lines) {
            // Acquired with the source's release: a count of another call is
            // an ownership defect, reported, never used.
            const int2 v = __ldcg(counts + count_index(a, s) + l);
            if (v.y != a.epoch) {
                atomicCAS(a.err, 0, (kPhaseStale << 24) | (s + 1));
                return false;
            }
            *c = v.x;
            return true;
        }
        uint2 d;
        if (!unit_wait(icounts + count_index(a, s) + l, flag, &d, deadline, a.err, a.active, kPhaseDispatch, s)) {
            if (!masked(a.active, s)) return false;
            d.x = 0;
        }
        *c = (int)d.x;
        return true;
    };
    // The row, among local expert l's rows, of token t's selection k at
    // position p among those from the source of order ord (the own rank's
    // rows come first, then the sources in order from rank+1); with record,
    // the token and the row are kept for combine. False where a count could
    // not be had.
    auto place = [&](int l, int ord, int p, int t, int k, bool record, int* row) {
        int begin = total[lo + l];
        for (int o = 1; o < ord; o++) {
            int c = 0;
            if (!count_of((a.rank + o) % R, l, &c)) return false;
            begin += c;
        }
        *row = begin + p;
        if (record) {
            a.src_info[l * rows_per_expert + *row] = t;
            a.row_pos[((int64_t)((a.rank + ord) % R) * T + t) * K + k] = *row;
        }
        return true;
    };
    if (blockIdx.x == gridDim.x - 1) {
        wait_sources(R);
        workers_sync();
        if (failed) return;
        for (int s = wt; rm && s < R; s += kWorkers) {  // rank-major: the tokens of each source
            int c;
            if (!count_of(s, 0, &c)) {
                failed = 1;
                break;
            }
            a.recv_count[s] = c;
        }
        for (int l = wt; !rm && l < L; l += kWorkers) {
            int64_t running = 0;
            for (int o = 0; o < R; o++) {
                const int s = (a.rank + o) % R;
                int c;
                if (!count_of(s, l, &c)) {
                    failed = 1;
                    break;
                }
                a.layout_range[(int64_t)l * R + s] = (running << 32) | (int64_t)c;
                running += c;
            }
            a.recv_count[l] = (int)running;
        }
    }
    const int nmsg = (R - 1) * T;
    const int nvec = inl && arg_fp8(a) ? H / 8 : rb / 16;  // per row: 16-byte vectors, or inline FP8 8-byte units
    bool traced = false;
    if (lines) {
        // The own rank's rows are written (the send pass); the workers
        // receive: one warp per (message, 16 of its row lines) polls the
        // header lines, then its row lines, and copies each line's data as
        // it stands to the rows the header names.
        const int chunks = (nrl + 15) / 16;
        const int nw = gridDim.x * (kWarps - 1);
        for (int item = (warp - 1) * gridDim.x + blockIdx.x; item < nmsg * chunks; item += nw) {
            const int m = item / chunks, c = item % chunks;
            const int ord = 1 + m / T, t = m % T, s = (a.rank + ord) % R;
            if (t >= tokens_from(a, s) || masked_warp(a, s)) continue;  // no such token, or a masked source (-T)
            const uint4* slot = inline_slot(a, self, s, t);
            // The row lines' first loads go out with the header's. The warp
            // is made whole first: the eight lanes of a line must load it in
            // one instruction, and the last block's workers come here from
            // the layout's per-lane waits.
            uint64_t w0[4] = {}, w1[4] = {}, h0 = 0, h1 = 0;
            __syncwarp();
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const int ln = c * 16 + 4 * q + lane / 8;
                if (ln < nrl) line_load(slot + (nhl + ln) * 8 + lane % 8, &w0[q], &w1[q]);
            }
            if (!lines_wait(slot, 0, nhl, flag64, &h0, &h1, deadline, a.err, a.active, kPhaseDispatch, s)) {
                if (masked_warp(a, s)) continue;
                break;
            }
            if (header_int(h0, h1, 0) == 0) continue;  // the token does not come here
            const int k = lane < K ? lane : 0;
            const int id = header_int(h0, h1, 2 + k), pk = header_int(h0, h1, 2 + 2 * K + k);
            const int wbits = rm ? header_int(h0, h1, 2 + K + k) : 0;
            const bool mine = lane < K && id >= lo && id < hi;
            unsigned mines = __ballot_sync(0xffffffffu, mine);
            if (mines == 0) continue;
            bool ok = true;
            int64_t row = 0;
            if (rm) {  // one slot, the header's place (the same in every selection here)
                row = (int64_t)s * T + __shfl_sync(0xffffffffu, pk, __ffs(mines) - 1);
                if (c == 0) {
                    record_slot(row, t, mine ? id - lo : -1, __int_as_float(wbits));
                    if (mine) a.row_pos[((int64_t)s * T + t) * K + lane] = (int)row;
                }
                mines &= -mines;
            } else if (mine) {
                int r = 0;
                ok = place(id - lo, ord, pk, t, lane, c == 0, &r);
                row = (int64_t)(id - lo) * rows_per_expert + r;
            }
            if (__any_sync(0xffffffffu, !ok)) break;
#pragma unroll
            for (int q = 0; q < 4 && ok; q++) {
                if (c * 16 + 4 * q >= nrl) break;
                ok = lines_settle(slot + nhl * 8, c * 16 + 4 * q, nrl, flag64, &w0[q], &w1[q], deadline, a.err,
                                  a.active, kPhaseDispatch, s);
            }
            if (!ok) {
                if (masked_warp(a, s)) continue;
                break;
            }
            for (unsigned mm = mines; mm; mm &= mm - 1) {
                const int64_t r = __shfl_sync(0xffffffffu, row, __ffs(mm) - 1);
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const int ln = c * 16 + 4 * q + lane / 8;
                    const int w = ln < nrl ? line_word(ln) : -1;
                    if (w >= 0) put_line_words(r, w, w0[q], w1[q]);
                }
            }
        }
        EPBENCH_TRACE_BY(a, 4, kWarp);
        return;
    }
    if (spread) {
        // Few messages: each worker warp of the grid takes a slice of one
        // message (kSliceVecs of its vectors or units), so a single token's
        // row is received by many SMs; every such warp reads the header.
        wait_sources(R);
        workers_sync();
        if (failed) return;
        const int slices = (nvec + kSliceVecs - 1) / kSliceVecs;
        const int nw = gridDim.x * (kWarps - 1);
        for (int item = (warp - 1) * gridDim.x + blockIdx.x; item < nmsg * slices; item += nw) {
            const int m = item / slices, v0 = item % slices * kSliceVecs + lane;
            const int ord = 1 + m / T, t = m % T, s = (a.rank + ord) % R;
            if (t >= tokens_from(a, s) || masked_warp(a, s)) continue;  // no such token, or a masked source (-T)
            const uint8_t* slot = dispatch_slot(a, self, s, t);
            const uint4* islot = inline_slot(a, self, s, t);
            // The slice's data loads first (inline: unit 2u + h is half h of
            // vector u, FP8 one unit per vector, the last unit the lane's
            // scale), then the header's.
            uint4 pv[kVecPerLane];
            constexpr int kUnits = 2 * kVecPerLane + 1;
            uint4 un[kUnits];
            const int upv = arg_fp8(a) ? 1 : 2;  // inline: units per vector
            // FP8: the scales of the slice's channel groups, one per lane.
            const int gps = kSliceVecs * (inl ? 8 : 16) / kScaleBlock;
            const int g = (v0 - lane) / kSliceVecs * gps + lane;
            const bool has_scale = arg_fp8(a) && lane < gps && g < groups;
            auto unit_at = [&](int i) -> const uint4* {
                if (i == kUnits - 1) return has_scale ? islot + p0 + H / 8 + g : nullptr;
                const int u = i / 2, v = v0 + u * kWarp;
                if (v >= nvec || (i % 2 == 1 && arg_fp8(a))) return nullptr;
                return islot + p0 + upv * v + i % 2;
            };
#pragma unroll
            for (int i = 0; i < kUnits; i++) {
                const uint4* q = inl ? unit_at(i) : nullptr;
                if (q != nullptr) un[i] = unit_load(q);
            }
#pragma unroll
            for (int u = 0; u < kVecPerLane; u++) {
                const int v = v0 + u * kWarp;
                if (!inl && v < nvec) pv[u] = __ldcg(reinterpret_cast<const uint4*>(slot + hdr) + v);
            }
            bool ok = true, live = true;
            int e = -1, p = 0;
            if (!inl) {
                live = fenced_header(a, slot, &e, &p);
            } else {
                // The presence unit and the lane's header unit polled together
                // (a token not sent here has no header this call).
                uint4 pr = unit_load(islot), hd = make_uint4(0, 0, 0, 0);
                if (lane < K) hd = unit_load(islot + 1 + lane);
                for (uint32_t spins = 1;; spins++) {
                    const bool pr_ok = pr.y == flag && pr.w == flag;
                    if (pr_ok && (pr.x == 0 || lane >= K || (hd.y == flag && hd.w == flag))) break;
                    if (!pr_ok) pr = unit_load(islot);
                    if (lane < K && !(hd.y == flag && hd.w == flag)) hd = unit_load(islot + 1 + lane);
                    if ((spins & 255) == 0 && bound_reached(deadline, a.err, a.active, kPhaseDispatch, s)) {
                        ok = false;
                        break;
                    }
                }
                live = pr.x != 0;
                if (live && lane < K) {
                    e = (int)hd.x;
                    p = (int)hd.z;
                }
            }
            if (__any_sync(0xffffffffu, !ok)) {
                if (masked_warp(a, s)) continue;  // -T: the source is given up on
                return;
            }
            if (!__shfl_sync(0xffffffffu, live, 0)) continue;
            const bool mine = e >= lo && e < hi;
            unsigned mines = __ballot_sync(0xffffffffu, mine);
            if (mines == 0) continue;
            int64_t row = 0;
            if (rm) {  // one slot, the header's place; recorded by the message's first slice
                row = (int64_t)s * T + __shfl_sync(0xffffffffu, p, __ffs(mines) - 1);
                if (v0 == lane) {
                    float w = 0.f;
                    if (lane < K && !inl) {
                        w = __ldcg(hdr_w(reinterpret_cast<const int*>(slot), K) + lane);
                    } else if (lane < K) {
                        uint2 d;
                        ok = unit_wait(islot + 1 + K + lane, flag, &d, deadline, a.err, a.active, kPhaseDispatch, s);
                        w = __uint_as_float(d.x);
                    }
                    record_slot(row, t, mine ? e - lo : -1, w);
                    if (mine) a.row_pos[((int64_t)s * T + t) * K + lane] = (int)row;
                }
                mines &= -mines;
            } else if (mine) {
                int r = 0;
                ok = place(e - lo, ord, p, t, lane, v0 == lane, &r);  // recorded by the message's first slice
                row = (int64_t)(e - lo) * rows_per_expert + r;
            }
            if (__any_sync(0xffffffffu, !ok)) {
                if (masked_warp(a, s)) continue;  // -T: the source is given up on
                return;
            }
            float scale = 0.f;
            if (inl) {
                ok = units_settle<kUnits>([&](int i) -> uint4& { return un[i]; }, unit_at, flag, deadline, a.err, a.active,
                                          kPhaseDispatch, [&](int) { return s; });
#pragma unroll
                for (int u = 0; u < kVecPerLane; u++)
                    pv[u] = make_uint4(un[2 * u].x, un[2 * u].z, un[2 * u + 1].x, un[2 * u + 1].z);
                scale = __uint_as_float(un[kUnits - 1].x);
            } else if (has_scale) {
                scale = __ldcg(reinterpret_cast<const float*>(slot + hdr + H) + g);
            }
            if (__any_sync(0xffffffffu, !ok)) {
                if (masked_warp(a, s)) continue;  // -T: the source is given up on
                return;
            }
            for (unsigned mm = mines; mm; mm &= mm - 1) {
                const int64_t r = __shfl_sync(0xffffffffu, row, __ffs(mm) - 1);
#pragma unroll
                for (int u = 0; u < kVecPerLane; u++) {
                    const int v = v0 + u * kWarp;
                    if (v >= nvec) continue;
                    if (inl && arg_fp8(a)) reinterpret_cast<uint2*>(recv + r * rb)[v] = make_uint2(pv[u].x, pv[u].y);
                    else reinterpret_cast<uint4*>(recv + r * rb)[v] = pv[u];
                }
                if (has_scale) a.recv_scales[r * groups + g] = scale;
            }
        }
        EPBENCH_TRACE_BY(a, 4, kWarp);
        return;
    }
    // Fenced, many tokens: the workers of a block take one message at a time.
    int waits = 0;  // messages waited for (src_masked's slot)
    for (int m = blockIdx.x; m < nmsg; m += gridDim.x) {
        const int ord = 1 + m / T, t = m % T, s = (a.rank + ord) % R;
        if (t >= tokens_from(a, s)) continue;  // the source sends no such token (block-uniform)
        wait_sources(ord + 1);
        // -T: one thread decides for the block whether the source is masked;
        // the other slot is the next message's, and this one is written
        // again only after every thread has passed the next barrier, so
        // has read it.
        const int par = waits++ & 1;
        if (a.active != nullptr && wt == 0) src_masked[par] = masked(a.active, s);
        workers_sync();  // also: the previous message's rows are stored
        if (failed) return;
        if (a.active != nullptr && src_masked[par]) continue;
        if (!traced) {
            EPBENCH_TRACE_BY(a, 3, kWarp);
            traced = true;
        }
        // The row and the header in one round trip: the row's loads do not
        // depend on where it goes.
        const uint8_t* slot = dispatch_slot(a, self, s, t);
        uint4 pv[kMaxRecvVecPerThread];
        float scale = 0.f;
#pragma unroll
        for (int u = 0; u < kMaxRecvVecPerThread; u++) {
            const int v = wt + u * kWorkers;
            if (v < nvec) pv[u] = __ldcg(reinterpret_cast<const uint4*>(slot + hdr) + v);
        }
        if (arg_fp8(a) && wt < groups) scale = __ldcg(reinterpret_cast<const float*>(slot + hdr + H) + wt);
        if (warp == 1) {
            int e = -1, p = 0;
            const bool live = fenced_header(a, slot, &e, &p);
            const bool mine = live && e >= lo && e < hi;
            const unsigned mines = __ballot_sync(0xffffffffu, mine);
            if (rm && mines != 0) {  // one slot, the header's place
                const int64_t row = (int64_t)s * T + __shfl_sync(0xffffffffu, p, __ffs(mines) - 1);
                const float w = lane < K ? __ldcg(hdr_w(reinterpret_cast<const int*>(slot), K) + lane) : 0.f;
                record_slot(row, t, mine ? e - lo : -1, w);
                if (mine) a.row_pos[((int64_t)s * T + t) * K + lane] = (int)row;
                if (lane == 0) rows[0] = row;
            } else if (mine) {
                int r = 0;
                if (!place(e - lo, ord, p, t, lane, true, &r)) failed = 1;
                rows[__popc(mines & ((1u << lane) - 1u))] = (int64_t)(e - lo) * rows_per_expert + r;
            }
            if (lane == 0) nrows = rm ? mines != 0 : __popc(mines);
        }
        workers_sync();
        if (failed) return;
        const int n = nrows;
#pragma unroll
        for (int u = 0; u < kMaxRecvVecPerThread; u++) {
            const int v = wt + u * kWorkers;
            if (v >= nvec) break;
#pragma unroll 1
            for (int i = 0; i < n; i++) reinterpret_cast<uint4*>(recv + rows[i] * rb)[v] = pv[u];
        }
        if (arg_fp8(a) && wt < groups) {
#pragma unroll 1
            for (int i = 0; i < n; i++) a.recv_scales[rows[i] * groups + wt] = scale;
        }
    }
    EPBENCH_TRACE_BY(a, 4, kWarp);
}
