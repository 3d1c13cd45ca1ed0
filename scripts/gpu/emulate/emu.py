# The GPU's tensor-core flash attention kernels (flash_*_tc_kernel in src/ops/cuda/attention.cu),
# emulated line by line on the CPU: written on 2026-11-27, when no GPU was at hand, to check
# their tiles, masks, shared-memory layout (one flat NaN-filled array per block, sized as the
# host sizes it, every region bounds-checked, every product's pointer 32-byte aligned) and
# barriers (a write another warp reads without a barrier between is reported in RACES)
# against a float64 dense formula, and to model their rounding. Keep it in step with the
# kernels when they change:  /usr/bin/python3 -W ignore scripts/gpu/emulate/sweep.py a,e   (34 s a mode)
# mode 'a': float64 everywhere, exact products.  mode 'b': float32 smem/scalars, 3xTF32 products.
import numpy as np

KW, MMA, WALK, WALKLD = 32, 16, 64, 72
LIMIT = 232448
NINF = -np.inf
RACES = []      # (kernel, phase description)
NOTES = set()


def padded_width(dk): return (dk + 15) // 16 * 16
def padded_ld(dk): return padded_width(dk) + 8
def tc_floats(rows_tiles, walk_tiles, score_rows, stats, dk):
    return 4 * ((rows_tiles + walk_tiles * WALK) * padded_ld(dk) + score_rows * WALKLD + stats)
def fwd_smem(w, dk): R = w * MMA; return tc_floats(2 * R, 2, R, 2 * R, dk)
def dq_smem(w, dk): R = w * MMA; return tc_floats(3 * R, 2, 2 * R, 2 * R, dk)
def kv_smem(w, dk): R = w * MMA; return tc_floats(4 * R, 2, 2 * R, 2 * WALK, dk)
def tensor_core_warps(smem, dk):
    for w in (4, 2, 1):
        if smem(w, dk) <= LIMIT: return w
    return 0
def shares(B, heads, rows, per): return B * heads * ((rows + per - 1) // per)
def share_of(block, heads, rows, per):
    chunks = (rows + per - 1) // per; bh = block // chunks
    return bh // heads, bh % heads, (block % chunks) * per
def visible_keys(keys, queries, causal, i):
    if not causal: return keys
    hz = i + keys - queries + 1
    return 0 if hz < 0 else min(hz, keys)


def tf32(x):
    """cvt.rna.tf32.f32: round to nearest, ties away, to 10 explicit mantissa bits."""
    x = np.asarray(x, np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    fin = np.isfinite(x)
    r = ((u + 0x1000) & 0xFFFFE000).astype(np.uint32)
    r = np.where(fin, r, x.view(np.uint32)).astype(np.uint32)
    return r.view(np.float32)


class Buf:
    """A global tensor as a flat array (NaN = never written)."""
    def __init__(self, n, dt, init=np.nan):
        self.a = np.full(n, init, dt)
    def rd(self, idx):
        idx = np.asarray(idx); assert idx.min() >= 0 and idx.max() < self.a.size, "global read out of bounds"
        return self.a[idx]
    def wr(self, idx, v):
        idx = np.asarray(idx); assert idx.min() >= 0 and idx.max() < self.a.size, "global write out of bounds"
        self.a[idx] = v


class Side:
    def __init__(self, buf, base, batch_stride, row_stride, start, length, time):
        self.buf, self.base, self.bs, self.rs, self.start, self.length, self.time = buf, base, batch_stride, row_stride, start, length, time
    def row(self, b, i):
        return self.base + ((self.start[b] + i) * self.rs if self.start is not None else b * self.bs + i * self.rs)
    def size(self, b): return self.length[b] if self.length is not None else self.time


class Smem:
    def __init__(self, nfloats, dt, warps, kname):
        self.a = np.full(nfloats, np.nan, dt)
        self.n, self.warps, self.kname = nfloats, warps, kname
        self.regions = {}
        self.R = np.zeros((warps, nfloats), bool); self.W = np.zeros((warps, nfloats), bool)
        self.phase = 'start'
    def region(self, name, start, size):
        assert start >= 0 and start + size <= self.n, f"region {name} [{start},{start+size}) outside smem of {self.n}"
        self.regions[name] = (start, size)
        return start
    def _chk(self, name, idx):
        s, z = self.regions[name]
        idx = np.asarray(idx)
        if idx.size == 0: return idx
        assert idx.min() >= s and idx.max() < s + z, f"{self.kname}: access outside region {name}: [{idx.min()},{idx.max()}] vs [{s},{s+z})"
        assert idx.max() < self.n
        return idx
    def rd(self, name, idx, warp):
        idx = self._chk(name, idx)
        if np.size(idx): self.R[warp, np.ravel(idx)] = True
        return self.a[idx]
    def wr(self, name, idx, v, warp):
        idx = self._chk(name, idx)
        if np.size(idx):
            self.W[warp, np.ravel(idx)] = True
            self.a[idx] = v
    def wr_block(self, name, idx, v, bd):
        """a block-wide loop `for e = threadIdx.x; e < N; e += blockDim` writing idx[e]."""
        idx = self._chk(name, np.asarray(idx))
        e = np.arange(idx.size)
        wps = (e % bd) // KW
        for w in range(self.warps):
            self.W[w, idx[wps == w]] = True
        self.a[idx] = v
    def sync(self, where):
        for w1 in range(self.warps):
            for w2 in range(self.warps):
                if w1 != w2:
                    bad = self.W[w1] & (self.R[w2] | self.W[w2])
                    if bad.any():
                        RACES.append((self.kname, f"{self.phase} -> {where}: warp {w1} writes, warp {w2} touches, e.g. smem[{np.flatnonzero(bad)[:3]}]"))
        self.R[:] = False; self.W[:] = False
        self.phase = where


def warp_max(v):  # v: 32 lanes; fmaxf (NaN-ignoring) butterfly
    lane = np.arange(KW)
    for o in (16, 8, 4, 2, 1): v = np.fmax(v, v[lane ^ o])
    return v
def warp_sum(v):
    lane = np.arange(KW)
    for o in (16, 8, 4, 2, 1): v = v + v[lane ^ o]
    return v


class Ctx:
    def __init__(self, mode):
        self.mode = mode
        self.dt = np.float64 if mode == 'a' else np.float32


def warp_product(ctx, sm, names, warp, brc, a, lda, b, ldb, c, ldc, n, depth, accumulate):
    an, bn, cn = names
    for off in (a, b, c):
        assert off % 8 == 0, f"{sm.kname}: warp_product pointer {off} not 32-byte aligned"
    for l in (lda, ldb, ldc):
        assert l % 8 == 0, f"ld {l} not a multiple of 8"
    assert n % 16 == 0 and depth % 8 == 0
    r = np.arange(16)[:, None]; kk = np.arange(depth)[None, :]
    A = sm.rd(an, a + r * lda + kk, warp)
    k2 = np.arange(depth)[:, None]; col = np.arange(n)[None, :]
    Bm = sm.rd(bn, b + (col * ldb + k2 if brc else k2 * ldb + col), warp)
    cidx = c + r * ldc + np.arange(n)[None, :]
    if ctx.mode == 'e':  # proposed fix 2: each k-step's three mmas into a fresh (truncating) fragment, added to acc in RN fp32
        C = sm.rd(cn, cidx, warp).astype(np.float32) if accumulate else np.zeros((16, n), np.float32)
        for k in range(0, depth, 8):
            a8 = A[:, k:k + 8].astype(np.float32); b8 = Bm[k:k + 8].astype(np.float32)
            ab = tf32(a8); as_ = tf32(a8 - ab); bb = tf32(b8); bs = tf32(b8 - bb)
            T = np.zeros((16, n), np.float32)
            for x, y in ((as_, bb), (ab, bs), (ab, bb)):
                exact = T.astype(np.float64) + x.astype(np.float64) @ y.astype(np.float64)
                T = exact.astype(np.float32)
                over = np.abs(T.astype(np.float64)) > np.abs(exact)
                T = np.where(over, np.nextafter(T, np.float32(0)), T).astype(np.float32)
            C = (C + T).astype(np.float32)
    elif ctx.mode == 'd':  # proposed fix: fresh (truncating) accumulator, then an RN fp32 add on the CUDA cores
        C0 = sm.rd(cn, cidx, warp).astype(np.float32) if accumulate else np.zeros((16, n), np.float32)
        C = np.zeros((16, n), np.float32)
        for k in range(0, depth, 8):
            a8 = A[:, k:k + 8].astype(np.float32); b8 = Bm[k:k + 8].astype(np.float32)
            ab = tf32(a8); as_ = tf32(a8 - ab); bb = tf32(b8); bs = tf32(b8 - bb)
            for x, y in ((as_, bb), (ab, bs), (ab, bb)):
                exact = C.astype(np.float64) + x.astype(np.float64) @ y.astype(np.float64)
                C = exact.astype(np.float32)
                over = np.abs(C.astype(np.float64)) > np.abs(exact)
                C = np.where(over, np.nextafter(C, np.float32(0)), C).astype(np.float32)
        C = (C0 + C).astype(np.float32)
    elif ctx.mode == 'a':
        C = sm.rd(cn, cidx, warp) if accumulate else np.zeros((16, n))
        C = C + A @ Bm
    else:
        C = sm.rd(cn, cidx, warp).astype(np.float32) if accumulate else np.zeros((16, n), np.float32)
        for k in range(0, depth, 8):
            a8 = A[:, k:k + 8].astype(np.float32); b8 = Bm[k:k + 8].astype(np.float32)
            ab = tf32(a8); as_ = tf32(a8 - ab); bb = tf32(b8); bs = tf32(b8 - bb)
            for x, y in ((as_, bb), (ab, bs), (ab, bb)):
                exact = C.astype(np.float64) + x.astype(np.float64) @ y.astype(np.float64)
                C = exact.astype(np.float32)
                if ctx.mode == 'c':  # tensor cores' truncating accumulation (round toward zero)
                    over = np.abs(C.astype(np.float64)) > np.abs(exact)
                    C = np.where(over, np.nextafter(C, np.float32(0)), C).astype(np.float32)
    sm.wr(cn, cidx, C, warp)


class Flash:
    """The kernel's Flash struct."""
    def __init__(self, **kw): self.__dict__.update(kw)
    def stat(self, b, h, i): return (b * self.heads + h) * self.tq + i
    def sees(self, b, i, j):  # j: array
        j = np.asarray(j)
        vis = j < visible_keys(self.k.size(b), self.q.size(b), self.causal, i)
        if self.padding is not None:
            jj = np.clip(j, 0, self.tk - 1)
            assert np.all(j[vis] < self.tk)
            vis = vis & ~self.padding[b, jj]
        return vis
    def sees_i(self, b, i, j):  # i: array, j scalar
        nk, nq = self.k.size(b), self.q.size(b)
        vis = j < (np.clip(i + nk - nq + 1, 0, nk) if self.causal else nk)
        if self.padding is not None: vis = vis & ~self.padding[b, j]
        return vis
    def keep_i(self, b, h, i, j, dt):
        if self.p == 0: return np.ones(np.shape(i), dt)
        return np.array([self.keep(b, h, int(ii), np.array([j]), dt)[0] for ii in i], dt)
    def keep(self, b, h, i, j, dt):
        if self.p == 0: return np.ones(np.shape(j), dt)
        return np.where(self.dropped(b, h, i, np.asarray(j)), dt(0), dt(1) / (dt(1) - dt(self.p)))
    def dropped(self, b, h, i, j):
        x = (np.uint64(b) * np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(h) * np.uint64(0xC2B2AE3D27D4EB4F)
             ^ np.uint64(i) * np.uint64(0x165667B19E3779F9)) + j.astype(np.uint64) * np.uint64(0x27D4EB2F165667C5)
        x ^= x >> np.uint64(29); x *= np.uint64(0xBF58476D1CE4E5B9); x ^= x >> np.uint64(32)
        return (x >> np.uint64(40)).astype(np.float64) / 2.0 ** 24 < self.p


def load_padded_key_value_tiles(sm, f, b, h, t0, horizon, keys, values, dk, bd):
    """load_padded_key_value_tiles: the keys and values of [t0, t0 + n) between barriers; returns n."""
    n = max(0, min(WALK, horizon - t0))
    sm.sync('tile top')
    load_padded_tile(sm, 'keys', keys, WALK, n, dk, lambda r: f.k.row(b, t0 + r) + (h // f.group) * dk, f.k.buf, bd)
    load_padded_tile(sm, 'values', values, WALK, n, dk, lambda r: f.v.row(b, t0 + r) + (h // f.group) * dk, f.v.buf, bd)
    sm.sync('tiles loaded')
    return n


def load_padded_tile(sm, name, tile, rows, n, dk, row_of, gbuf, bd):
    width, ld = padded_width(dk), padded_ld(dk)
    e = np.arange(rows * width); r = e // width; c = e % width
    vals = np.zeros(e.size, sm.a.dtype)
    m = (r < n) & (c < dk)
    if m.any():
        offs = np.array([row_of(int(rr)) for rr in range(n)])
        vals[m] = gbuf.rd(offs[r[m]] + c[m])
    sm.wr_block(name, tile + r * ld + c, vals, bd)


def fill_rows(sm, name, x, rows, ld, value, bd):
    sm.wr_block(name, x + np.arange(rows * ld), value, bd)


def forward_tc(f, ctx, grid=3):
    dt = ctx.dt; dk = f.dk
    w = tensor_core_warps(fwd_smem, dk); assert w
    R = w * MMA; bd = w * KW; ld = padded_ld(dk); width = padded_width(dk)
    nsh = shares(f.B, f.heads, f.tq, R); grid = min(grid, nsh)
    scale = dt(f.scale)
    for blk in range(grid):
        sm = Smem(fwd_smem(w, dk) // 4, dt, w, 'forward')
        query = sm.region('query', 0, R * ld); acc = sm.region('acc', query + R * ld, R * ld)
        keys = sm.region('keys', acc + R * ld, WALK * ld); values = sm.region('values', keys + WALK * ld, WALK * ld)
        scores = sm.region('scores', values + WALK * ld, R * WALKLD); m = sm.region('m', scores + R * WALKLD, R); l = sm.region('l', m + R, R)
        for block in range(blk, nsh, grid):
            b, h, first = share_of(block, f.heads, f.tq, R)
            nq, nk = f.q.size(b), f.k.size(b)
            end = min(first + R, f.tq); q_end = min(end, nq)
            for i in range(max(first, nq), end): f.lse.wr(f.stat(b, h, i), NINF)
            if first >= nq: continue
            sm.sync('share start')
            load_padded_tile(sm, 'query', query, R, q_end - first, dk, lambda r: f.q.row(b, first + r) + h * dk, f.q.buf, bd)
            fill_rows(sm, 'acc', acc, R, ld, 0.0, bd)
            rr = np.arange(R); sm.wr_block('m', m + rr, NINF, bd); sm.wr_block('l', l + rr, 0.0, bd)
            horizon = visible_keys(nk, nq, f.causal, q_end - 1)
            t0 = 0
            while t0 == 0 or t0 < horizon:
                n = load_padded_key_value_tiles(sm, f, b, h, t0, horizon, keys, values, dk, bd)
                for warp in range(w):
                    r0 = warp * MMA; s = scores + r0 * WALKLD
                    warp_product(ctx, sm, ('query', 'keys', 'scores'), warp, True, query + r0 * ld, ld, keys, ld, s, WALKLD, WALK, width, False)
                    jl = np.arange(WALK)  # lane + u*32
                    for r in range(r0, r0 + MMA):
                        i = first + r
                        cond = (i < q_end) & (jl < n)
                        if i < q_end: cond = cond & f.sees(b, i, t0 + jl)
                        score = np.full(WALK, NINF, dt)
                        if cond.any(): score[cond] = scale * sm.rd('scores', scores + r * WALKLD + jl[cond], warp)
                        m_old = sm.rd('m', m + r, warp); l_old = sm.rd('l', l + r, warp)
                        m_new = np.fmax(m_old, warp_max(np.fmax(score[:32], score[32:]))[0])
                        p = np.where(score == NINF, dt(0), np.exp(score - m_new)).astype(dt)
                        kept = dt(0) if m_old == NINF else dt(np.exp(dt(m_old - m_new)))
                        ssum = warp_sum((p[:32] + p[32:]).astype(dt))[0]
                        sm.wr('m', m + r, m_new, warp); sm.wr('l', l + r, dt(l_old * kept + ssum), warp)
                        kp = f.keep(b, h, i, t0 + jl, dt)
                        sm.wr('scores', scores + r * WALKLD + jl, np.where(p == 0, dt(0), p * kp), warp)
                        c = np.arange(width)
                        sm.wr('acc', acc + r * ld + c, sm.rd('acc', acc + r * ld + c, warp) * kept, warp)
                    warp_product(ctx, sm, ('scores', 'values', 'acc'), warp, False, s, WALKLD, values, ld, acc + r0 * ld, ld, width, WALK, True)
                t0 += WALK
            for warp in range(w):
                r0 = warp * MMA
                for r in range(r0, r0 + MMA):
                    if not first + r < q_end: break
                    i = first + r
                    lr = sm.rd('l', l + r, warp)
                    inv = dt(1) / lr if lr > 0 else dt(0)
                    c = np.arange(dk)
                    val = sm.rd('acc', acc + r * ld + c, warp) * inv if lr > 0 else np.zeros(dk, dt)
                    f.out.buf.wr(f.out.row(b, i) + h * dk + c, val)
                    f.lse.wr(f.stat(b, h, i), (sm.rd('m', m + r, warp) + np.log(lr)) if lr > 0 else NINF)
    return w


def row_dot_kernel(f, ctx):
    dt = ctx.dt
    for b in range(f.B):
        for h in range(f.heads):
            for i in range(f.tq):
                if i >= f.q.size(b): continue
                partial = np.zeros(KW, dt)
                for c0 in range(0, f.dk, KW):
                    c = c0 + np.arange(KW); mk = c < f.dk
                    gg = np.zeros(KW, dt); oo = np.zeros(KW, dt)
                    gg[mk] = f.g.buf.rd(f.g.row(b, i) + h * f.dk + c[mk]); oo[mk] = f.out.buf.rd(f.out.row(b, i) + h * f.dk + c[mk])
                    partial = (partial + gg * oo).astype(dt)
                f.row_dot.wr(f.stat(b, h, i), warp_sum(partial)[0])


def tc_score_gradient_v(f, dt, ok, keep, lse, row_dot, score, dp):
    """vectorized: ok = in_tiles && lse != -inf && sees (caller); returns (ds, weight)."""
    ok = ok & (lse != NINF)
    sc = dt(f.scale)
    with np.errstate(all='ignore'):
        p = np.exp((sc * score).astype(dt) - lse).astype(dt)
        ds = ((p * (dp * keep - row_dot).astype(dt)).astype(dt) * sc).astype(dt)
        wt = (p * keep).astype(dt)
    return np.where(ok, ds, dt(0)), np.where(ok, wt, dt(0))


def query_gradient_tc(f, ctx, grid=3):
    dt = ctx.dt; dk = f.dk
    w = tensor_core_warps(dq_smem, dk)
    if not w: return 0
    R = w * MMA; bd = w * KW; ld = padded_ld(dk); width = padded_width(dk)
    nsh = shares(f.B, f.heads, f.tq, R); grid = min(grid, nsh)
    for blk in range(grid):
        sm = Smem(dq_smem(w, dk) // 4, dt, w, 'query_gradient')
        query = sm.region('query', 0, R * ld); grad = sm.region('grad', query + R * ld, R * ld); acc = sm.region('acc', grad + R * ld, R * ld)
        keys = sm.region('keys', acc + R * ld, WALK * ld); values = sm.region('values', keys + WALK * ld, WALK * ld)
        scores = sm.region('scores', values + WALK * ld, R * WALKLD); dscores = sm.region('dscores', scores + R * WALKLD, R * WALKLD)
        lse = sm.region('lse', dscores + R * WALKLD, R); row_dot = sm.region('row_dot', lse + R, R)
        for block in range(blk, nsh, grid):
            b, h, first = share_of(block, f.heads, f.tq, R)
            nq = f.q.size(b); q_end = min(first + R, nq)
            if first >= nq: continue
            sm.sync('share start')
            load_padded_tile(sm, 'query', query, R, q_end - first, dk, lambda r: f.q.row(b, first + r) + h * dk, f.q.buf, bd)
            load_padded_tile(sm, 'grad', grad, R, q_end - first, dk, lambda r: f.g.row(b, first + r) + h * dk, f.g.buf, bd)
            fill_rows(sm, 'acc', acc, R, ld, 0.0, bd)
            rr = np.arange(R); row = first + rr < q_end
            lv = np.full(R, NINF, dt); rv = np.zeros(R, dt)
            for r in rr[row]:
                lv[r] = f.lse.rd(f.stat(b, h, first + r)); rv[r] = f.row_dot.rd(f.stat(b, h, first + r))
            sm.wr_block('lse', lse + rr, lv, bd); sm.wr_block('row_dot', row_dot + rr, rv, bd)
            horizon = visible_keys(f.k.size(b), nq, f.causal, q_end - 1)
            t0 = 0
            while t0 == 0 or t0 < horizon:
                n = load_padded_key_value_tiles(sm, f, b, h, t0, horizon, keys, values, dk, bd)
                for warp in range(w):
                    r0 = warp * MMA; s = scores + r0 * WALKLD; ds = dscores + r0 * WALKLD
                    warp_product(ctx, sm, ('query', 'keys', 'scores'), warp, True, query + r0 * ld, ld, keys, ld, s, WALKLD, WALK, width, False)
                    warp_product(ctx, sm, ('grad', 'values', 'dscores'), warp, True, grad + r0 * ld, ld, values, ld, ds, WALKLD, WALK, width, False)
                    jl = np.arange(WALK)
                    for r in range(r0, r0 + MMA):
                        i = first + r
                        e = r * WALKLD + jl
                        ok = (i < q_end) & (jl < n)
                        if i < q_end: ok = ok & f.sees(b, i, t0 + jl)
                        lr = sm.rd('lse', lse + r, warp); rd = sm.rd('row_dot', row_dot + r, warp)
                        ok = ok & (lr != NINF)
                        sc = np.zeros(WALK, dt); dp = np.zeros(WALK, dt)
                        sc[ok] = sm.rd('scores', scores + e[ok], warp); dp[ok] = sm.rd('dscores', dscores + e[ok], warp)
                        kp = f.keep(b, h, i, t0 + jl, dt)
                        dsv, _ = tc_score_gradient_v(f, dt, ok, kp, lr, rd, sc, dp)
                        sm.wr('dscores', dscores + e, dsv, warp)
                    warp_product(ctx, sm, ('dscores', 'keys', 'acc'), warp, False, ds, WALKLD, keys, ld, acc + r0 * ld, ld, width, WALK, True)
                t0 += WALK
            for warp in range(w):
                r0 = warp * MMA
                for r in range(r0, r0 + MMA):
                    if not first + r < q_end: break
                    c = np.arange(dk)
                    f.dq.buf.wr(f.dq.row(b, first + r) + h * dk + c, sm.rd('acc', acc + r * ld + c, warp))
    return w


def key_value_gradient_tc(f, ctx, grid=3):
    dt = ctx.dt; dk = f.dk; kv_heads = f.heads // f.group
    w = tensor_core_warps(kv_smem, dk)
    if not w: return 0
    R = w * MMA; bd = w * KW; ld = padded_ld(dk); width = padded_width(dk)
    nsh = shares(f.B, kv_heads, f.tk, R); grid = min(grid, nsh)
    for blk in range(grid):
        sm = Smem(kv_smem(w, dk) // 4, dt, w, 'key_value_gradient')
        key = sm.region('key', 0, R * ld); value = sm.region('value', key + R * ld, R * ld)
        dk_acc = sm.region('dk_acc', value + R * ld, R * ld); dv_acc = sm.region('dv_acc', dk_acc + R * ld, R * ld)
        queries = sm.region('queries', dv_acc + R * ld, WALK * ld); grads = sm.region('grads', queries + WALK * ld, WALK * ld)
        scores = sm.region('scores', grads + WALK * ld, R * WALKLD); dscores = sm.region('dscores', scores + R * WALKLD, R * WALKLD)
        lse = sm.region('lse', dscores + R * WALKLD, WALK); row_dot = sm.region('row_dot', lse + WALK, WALK)
        sm.regions['dk_dv_acc'] = (dk_acc, 2 * R * ld)
        for block in range(blk, nsh, grid):
            b, kvh, j0 = share_of(block, kv_heads, f.tk, R)
            nq, nk = f.q.size(b), f.k.size(b); j_end = min(j0 + R, nk)
            if j0 >= nk: continue
            sm.sync('share start')
            load_padded_tile(sm, 'key', key, R, j_end - j0, dk, lambda r: f.k.row(b, j0 + r) + kvh * dk, f.k.buf, bd)
            load_padded_tile(sm, 'value', value, R, j_end - j0, dk, lambda r: f.v.row(b, j0 + r) + kvh * dk, f.v.buf, bd)
            fill_rows(sm, 'dk_dv_acc', dk_acc, 2 * R, ld, 0.0, bd)
            start = max(0, j0 + nq - nk) if f.causal else 0
            for h in range(kvh * f.group, (kvh + 1) * f.group):
                t0 = start
                while t0 == start or t0 < nq:
                    n = max(0, min(WALK, nq - t0))
                    sm.sync('tile top')
                    load_padded_tile(sm, 'queries', queries, WALK, n, dk, lambda r: f.q.row(b, t0 + r) + h * dk, f.q.buf, bd)
                    load_padded_tile(sm, 'grads', grads, WALK, n, dk, lambda r: f.g.row(b, t0 + r) + h * dk, f.g.buf, bd)
                    cc = np.arange(WALK); lv = np.full(WALK, NINF, dt); rv = np.zeros(WALK, dt)
                    for c in range(n):
                        lv[c] = f.lse.rd(f.stat(b, h, t0 + c)); rv[c] = f.row_dot.rd(f.stat(b, h, t0 + c))
                    sm.wr_block('lse', lse + cc, lv, bd); sm.wr_block('row_dot', row_dot + cc, rv, bd)
                    sm.sync('tiles loaded')
                    for warp in range(w):
                        r0 = warp * MMA; s = scores + r0 * WALKLD; ds = dscores + r0 * WALKLD
                        warp_product(ctx, sm, ('key', 'queries', 'scores'), warp, True, key + r0 * ld, ld, queries, ld, s, WALKLD, WALK, width, False)
                        warp_product(ctx, sm, ('value', 'grads', 'dscores'), warp, True, value + r0 * ld, ld, grads, ld, ds, WALKLD, WALK, width, False)
                        cl = np.arange(WALK)
                        lr = sm.rd('lse', lse + cl, warp); rd = sm.rd('row_dot', row_dot + cl, warp)
                        for r in range(r0, r0 + MMA):
                            j = j0 + r; e = r * WALKLD + cl
                            ok = (j < j_end) & (cl < n)
                            if j < j_end:
                                ok = ok & f.sees_i(b, t0 + cl, j)
                            ok = ok & (lr != NINF)
                            sc = np.zeros(WALK, dt); dp = np.zeros(WALK, dt)
                            sc[ok] = sm.rd('scores', scores + e[ok], warp); dp[ok] = sm.rd('dscores', dscores + e[ok], warp)
                            kp = f.keep_i(b, h, t0 + cl, j, dt)
                            dsv, wt = tc_score_gradient_v(f, dt, ok, kp, lr, rd, sc, dp)
                            sm.wr('dscores', dscores + e, dsv, warp); sm.wr('scores', scores + e, wt, warp)
                        warp_product(ctx, sm, ('scores', 'grads', 'dk_dv_acc'), warp, False, s, WALKLD, grads, ld, dv_acc + r0 * ld, ld, width, WALK, True)
                        warp_product(ctx, sm, ('dscores', 'queries', 'dk_dv_acc'), warp, False, ds, WALKLD, queries, ld, dk_acc + r0 * ld, ld, width, WALK, True)
                    t0 += WALK
            for warp in range(w):
                r0 = warp * MMA
                for r in range(r0, r0 + MMA):
                    if not j0 + r < j_end: break
                    c = np.arange(dk)
                    f.dk.buf.wr(f.dk.row(b, j0 + r) + kvh * dk + c, sm.rd('dk_dv_acc', dk_acc + r * ld + c, warp))
                    f.dv.buf.wr(f.dv.row(b, j0 + r) + kvh * dk + c, sm.rd('dk_dv_acc', dv_acc + r * ld + c, warp))
    return w
