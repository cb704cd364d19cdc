"""Medians of decode config 5's per-tile clock trace (session 17; trace.patch prints the TR
lines at exit with DSV4_TRACE=1; the build must drop ptxas -Werror: the trace spills 20 bytes).
Usage: trace_summary.py BENCH_OUTPUT NTILES.
TR slot smid warp tile e0..e3; warps 0-7 PV (PREADY passed, PV done, land done, stage
issued), 8-11 score (KFULL passed, QK done, softmax done, conversion done); tile 43: start, PV start done,
PV epilogue end, score FINAL arrive."""
import sys, statistics as st
from collections import defaultdict
M=1<<32; D=defaultdict(dict)
for l in open(sys.argv[1]):
    if not l.startswith('TR '): continue
    f=l.split(); s,w,i=int(f[1]),int(f[3]),int(f[4]); D[s][(w,i)]=[int(x) for x in f[5:9]]
d=lambda a,b:(b-a)%M
n=int(sys.argv[2]); acc=defaultdict(list)
for s,t in D.items():
    st0=min(t[(w,43)][0] for w in range(12) if (w,43) in t)
    acc['cta total (start -> PV epilogue end, w0)'].append(d(st0,t[(0,43)][2]))
    acc['start -> PV start done (w0)'].append(d(st0,t[(0,43)][1]))
    acc['start -> first KFULL pass (w8)'].append(d(st0,t[(8,0)][0]))
    acc['last softmax (w8) -> epilogue end (w0)'].append(d(t[(8,n-1)][2],t[(0,43)][2]))
    for i in range(3,n-3):
        for w in range(8,12):
            T=t[(w,i)]; acc['score QK'].append(d(T[0],T[1])); acc['score PFREE wait + softmax'].append(d(T[1],T[2]))
            acc['score PREADY arrive + ahead (conversion)'].append(d(T[2],T[3])); acc['score KFULL wait'].append(d(T[3],t[(w,i+1)][0]))
            acc['score ahead, even tiles'if i%2==0 else 'score ahead, odd tiles'].append(d(T[2],T[3]))
            acc['score QK, even tiles'if i%2==0 else 'score QK, odd tiles'].append(d(T[0],T[1]))
        acc['period (w8 KFULL pass -> next)'].append(d(t[(8,i)][0],t[(8,i+1)][0]))
        for w in range(8):
            T=t[(w,i)]; acc['pv PV mma'].append(d(T[0],T[1])); acc['pv land (wait+dequant)'].append(d(T[1],T[2]))
            acc['pv stage'].append(d(T[2],T[3])); acc['pv PREADY wait'].append(d(T[3],t[(w,i+1)][0]))
        acc['PV land end(i, last of w0-7) -> QK start(i+2, w8)'].append(d(max((t[(w,i)][2] for w in range(8)), key=lambda x:d(st0,x)),t[(8,i+2)][0]))
        acc['pv PFREE (PV end w0-7 max) -> score PFREE pass(i+1)'].append(d(max((t[(w,i)][1] for w in range(8)), key=lambda x:d(st0,x)),t[(8,i+1)][2]))
for k,v in acc.items():
    v=sorted(v); print(f"  {k:55s} median {st.median(v):7.0f} p10 {v[len(v)//10]:7.0f} p90 {v[9*len(v)//10]:7.0f} (n={len(v)})")
