import os, sys, itertools
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emu
from emu import Buf, Side, Flash, Ctx, NINF


def make_side(rng, B, lengths, T, width, extra, base_off, dt):
    """[B, T, width] (or packed [1, sum(lengths), width]) as a strided view: rows `width + extra` apart, starting at base_off."""
    rs = width + extra
    if lengths is not None:
        start = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(int); rows = int(np.sum(lengths))
        bs = rows * rs; nb = 1; time = max(lengths) if len(lengths) else 0
    else:
        start = None; rows = T; bs = T * rs + 3 * 8; nb = B; time = T
    buf = Buf(base_off + nb * bs + 8, dt)
    s = Side(buf, base_off, bs, rs, start, None if lengths is None else list(lengths), time)
    return s


def fill(rng, s, B, width, scale=1.0):
    for b in range(B):
        for i in range(s.size(b)):
            s.buf.a[s.row(b, i) + np.arange(width)] = (rng.standard_normal(width) * scale).astype(np.float32)


def rows_of(s, b, n, col, dk):
    return np.array([s.buf.a[s.row(b, i) + col + np.arange(dk)] for i in range(n)], np.float64).reshape(n, dk)


def reference(f):
    """float64 dense reference: out, lse, dq, dk, dv as dicts keyed (b, h/kvh) -> arrays."""
    R = {}
    sc = float(np.float32(f.scale))
    dtk = np.float64
    for b in range(f.B):
        nq, nk = f.q.size(b), f.k.size(b)
        for h in range(f.heads):
            kvh = h // f.group
            Q = rows_of(f.q, b, nq, h * f.dk, f.dk); K = rows_of(f.k, b, nk, kvh * f.dk, f.dk); V = rows_of(f.v, b, nk, kvh * f.dk, f.dk)
            G = rows_of(f.g, b, nq, h * f.dk, f.dk)
            M = np.zeros((nq, nk), bool)
            for i in range(nq): M[i] = f.sees(b, i, np.arange(nk))
            S = np.where(M, sc * (Q @ K.T), NINF)
            mx = S.max(axis=1, initial=NINF)
            with np.errstate(all='ignore'):
                lse = np.where(mx == NINF, NINF, mx + np.log(np.exp(S - np.where(mx == NINF, 0, mx)[:, None]).sum(1)))
                P = np.where(M, np.exp(S - np.where(lse == NINF, 0, lse)[:, None]), 0.0)
            KP = np.array([f.keep(b, h, i, np.arange(nk), np.float64) for i in range(nq)]).reshape(nq, nk)
            O = (P * KP) @ V
            D = (G * O).sum(1)
            dP = G @ V.T
            dS = P * (dP * KP - D[:, None]) * sc
            R[('out', b, h)] = O; R[('lse', b, h)] = lse; R[('dq', b, h)] = dS @ K
            R[('dk', b, kvh)] = R.get(('dk', b, kvh), 0) + dS.T @ Q
            R[('dv', b, kvh)] = R.get(('dv', b, kvh), 0) + (P * KP).T @ G
    return R


def build(case, rng, dt):
    dk, heads, kvh = case['dk'], case['heads'], case['kv_heads']
    pq, pk = case.get('packed_q'), case.get('packed_k')
    B = len(pq) if pq is not None else (len(pk) if pk is not None else case['B'])
    tq = max(pq) if pq is not None else case['tq']; tk = max(pk) if pk is not None else case['tk']
    ex = case.get('extra', 0)
    q = make_side(rng, B, pq, tq, heads * dk, ex, 8 * ex // 3 if ex else 0, dt)
    k = make_side(rng, B, pk, tk, kvh * dk, ex, heads * dk if ex else 0, dt)
    v = make_side(rng, B, pk, tk, kvh * dk, ex, 5 if ex else 0, dt)   # v deliberately at an odd float offset (a fused slice)
    g = make_side(rng, B, pq, tq, heads * dk, 0, 0, dt)
    fill(rng, q, B, heads * dk, case.get('qscale', 1.0)); fill(rng, k, B, kvh * dk); fill(rng, v, B, kvh * dk); fill(rng, g, B, heads * dk)
    out = make_side(rng, B, pq, tq, heads * dk, 0, 0, dt)
    dq = make_side(rng, B, pq, tq, heads * dk, 0, 0, dt)
    dkk = make_side(rng, B, pk, tk, kvh * dk, 0, 0, dt); dv = make_side(rng, B, pk, tk, kvh * dk, 0, 0, dt)
    padding = None
    if case.get('padding'):
        padding = np.zeros((B, tk), bool)
        for b in range(B):
            kind = (b + case['padding']) % 3
            if kind == 0: padding[b] = rng.random(tk) < 0.3
            elif kind == 1: padding[b, max(1, tk // 2):] = True   # all keys past a point padded
            else: padding[b, :] = True if tk < 3 else False
    f = Flash(B=B, heads=heads, tq=tq, tk=tk, dk=dk, group=heads // kvh, scale=float(np.float32(1 / np.sqrt(np.float32(dk)))),
              p=case.get('p', 0.0), causal=case.get('causal', False), padding=padding, q=q, k=k, v=v, g=g, out=out, dq=dq, dk_=None,
              lse=Buf(B * heads * tq, dt), row_dot=Buf(B * heads * tq, dt))
    f.dk = dk; f.dkside = dkk; f.dv = dv
    return f


def err(got, want):
    d = np.abs(got - want)
    both_inf = (got == want)
    d = np.where(both_inf, 0.0, d)
    e = (d / np.maximum(1, np.abs(np.where(np.isinf(want), 1, want)))).max(initial=0)
    fw = np.isfinite(want)
    return e, (np.sum(np.where(fw, got - want, 0) ** 2), np.sum(np.where(fw, want, 0) ** 2))


def run_case(case, mode, grid=3, seed=0, e2e=False):
    rng = np.random.default_rng(seed)
    dt = np.float64 if mode == 'a' else np.float32
    f = build(case, rng, dt)
    ref = reference(f)
    ctx = Ctx(mode)
    res = {}; problems = []
    wf = emu.forward_tc(f, ctx, grid)
    # forward outputs
    E = {}
    def acc(name, e):
        E.setdefault(name, [0, 0, 0]); E[name][0] = max(E[name][0], e[0]); E[name][1] += e[1][0]; E[name][2] += e[1][1]
    unwritten = {}
    for b in range(f.B):
        nq, nk = f.q.size(b), f.k.size(b)
        for h in range(f.heads):
            lse = np.array([f.lse.a[f.stat(b, h, i)] for i in range(f.tq)])
            if np.isnan(lse).any(): problems.append(f'lse NaN at b{b} h{h} rows {np.flatnonzero(np.isnan(lse))[:5]}')
            want = np.full(f.tq, NINF); want[:nq] = ref[('lse', b, h)]
            acc('lse', err(lse, want))
            O = rows_of(f.out, b, nq, h * f.dk, f.dk)
            if np.isnan(O).any(): problems.append(f'out NaN b{b} h{h}')
            acc('out', err(O, ref[('out', b, h)]))
    # backward: from the reference out and lse (rounded to dt)
    for b in range(f.B if not e2e else 0):
        nq = f.q.size(b)
        for h in range(f.heads):
            for i in range(f.tq):
                f.lse.a[f.stat(b, h, i)] = ref[('lse', b, h)][i] if i < nq else NINF
            for i in range(nq):
                f.out.buf.a[f.out.row(b, i) + h * f.dk + np.arange(f.dk)] = ref[('out', b, h)][i]
    emu.row_dot_kernel(f, ctx)
    dkside = f.dkside
    fk = f.dk; f.dk = fk
    # the kernels use f.dk as the width and the Side for the gradient: give them separate names
    class FF(Flash): pass
    g2 = Flash(**{**f.__dict__}); g2.dk = fk
    wq = emu.query_gradient_tc(g2, ctx, grid)
    # key_value kernel writes via f.dk.buf (a Side): emulate with a proxy object
    g3 = Flash(**{**f.__dict__})
    class DKW(int): pass
    dkw = DKW(fk); dkw.buf = dkside.buf; dkw.row = dkside.row; g3.dk = dkw
    wkv = emu.key_value_gradient_tc(g3, ctx, grid)
    if wq:
        for b in range(f.B):
            for h in range(f.heads):
                d = rows_of(f.dq, b, f.q.size(b), h * fk, fk)
                if np.isnan(d).any(): problems.append(f'dq NaN b{b} h{h} rows {np.unique(np.nonzero(np.isnan(d))[0])[:5]}')
                acc('dq', err(d, ref[('dq', b, h)]))
    if wkv:
        for b in range(f.B):
            for kh in range(f.heads // f.group):
                for nm, side in (('dk', dkside), ('dv', f.dv)):
                    d = rows_of(side, b, f.k.size(b), kh * fk, fk)
                    if np.isnan(d).any(): problems.append(f'{nm} NaN b{b} kvh{kh} rows {np.unique(np.nonzero(np.isnan(d))[0])[:5]}')
                    acc(nm, err(d, ref[(nm, b, kh)]))
        # rows of dk/dv never written (NaN) anywhere in the tensors
        for nm, side in (('dk', dkside), ('dv', f.dv)):
            unwritten[nm] = int(np.isnan(side.buf.a).sum())
    E = {k: (v[0], np.sqrt(v[1]) / max(np.sqrt(v[2]), 1e-300)) for k, v in E.items()}
    return dict(warps=(wf, wq, wkv), err=E, problems=problems)
