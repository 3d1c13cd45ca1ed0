import os, sys, time; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import *
modes = sys.argv[1].split(',') if len(sys.argv) > 1 else ['a', 'b']
fams = []
for dk in (20, 64, 128, 160, 320):
    fams.append(('dense', dict(dk=dk, heads=2, kv_heads=2, B=2, tq=150, tk=150)))
    fams.append(('tiny', dict(dk=dk, heads=1, kv_heads=1, B=1, tq=1, tk=1)))
    fams.append(('causal_nk>nq+pad+drop+strided', dict(dk=dk, heads=2, kv_heads=1, B=3, tq=37, tk=150, causal=True, padding=1, p=0.1, extra=24)))
for dk in (20, 64, 128):
    fams.append(('causal_nq>nk', dict(dk=dk, heads=2, kv_heads=2, B=2, tq=150, tk=37, causal=True)))
    fams.append(('causal_square_64', dict(dk=dk, heads=1, kv_heads=1, B=1, tq=64, tk=64, causal=True, p=0.3)))
    fams.append(('packed_qk', dict(dk=dk, heads=2, kv_heads=2, packed_q=[1, 70, 17, 64, 33], packed_k=[1, 70, 17, 64, 33], causal=True, p=0.1)))
    fams.append(('packed_qk_diff', dict(dk=dk, heads=4, kv_heads=2, packed_q=[5, 70, 1, 40], packed_k=[66, 3, 70, 1], causal=True, padding=2)))
    fams.append(('packed_q_only', dict(dk=dk, heads=4, kv_heads=1, packed_q=[3, 65, 20], B=3, tk=80, padding=0, extra=8)))
    fams.append(('packed_k_only', dict(dk=dk, heads=2, kv_heads=1, packed_k=[3, 65, 0, 20], B=4, tq=40, p=0.2)))
    fams.append(('gqa4/1_drop', dict(dk=dk, heads=4, kv_heads=1, B=1, tq=100, tk=129, causal=True, p=0.25, extra=40)))
    fams.append(('peaky', dict(dk=dk, heads=2, kv_heads=2, B=1, tq=80, tk=100, qscale=4.0, padding=1)))
which = sys.argv[2] if len(sys.argv) > 2 else None
for mode in modes:
    for name, case in fams:
        if which and which not in name: continue
        t = time.time()
        try:
            r = run_case(case, mode)
            es = ' '.join(f"{k}={v[0]:.2e}/{v[1]:.1e}" for k, v in r['err'].items())
            print(f"{mode} {name:32s} dk={case['dk']:3d} warps={r['warps']} {es} {'PROBLEMS ' + str(r['problems'][:4]) if r['problems'] else ''} ({time.time()-t:.1f}s)", flush=True)
        except AssertionError as e:
            print(f"{mode} {name} dk={case['dk']} ASSERT {e}", flush=True)
print('RACES', emu.RACES[:10])
