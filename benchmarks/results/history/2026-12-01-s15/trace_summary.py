"""Medians of prefill config 4's per-tile clock trace (session 15; trace.patch prints the
TR lines at exit). Usage: trace_summary.py BENCH_OUTPUT NTILES [START_END_SLOT].
A record is TR slot smid warp tile ev1..ev8 (32-bit SM clocks; warps 0-3 PV, 4-5 score;
the tile slot START_END_SLOT holds each warp's start, end and PV start-up done)."""
import sys, statistics as st
LAST=int(sys.argv[3]) if len(sys.argv)>3 else 79
from collections import defaultdict
M=1<<32
D=defaultdict(dict); SM={}
for l in open(sys.argv[1]):
    if not l.startswith('TR '): continue
    f=l.split(); s,sm,w,i=int(f[1]),f[2],int(f[3]),int(f[4])
    D[s][(w,i)]=[int(x) for x in f[5:]]+[0]*8; SM[s]=sm
def d(a,b): return (b-a)%M
acc=defaultdict(list)
for s,t in D.items():
    n=int(sys.argv[2])
    st0=min(t[(w,LAST)][0] for w in range(6) if (w,LAST) in t)
    K={w:[t[(w,i)][0] for i in range(n)] for w in (4,5)}
    R={w:[t[(w,i)][1] for i in range(n)] for w in (4,5)}
    P={w:[t[(w,i)][0] for i in range(n)] for w in range(4)}
    Dn={w:[t[(w,i)][1] for i in range(n-2)] for w in range(4)}
    L={w:[t[(w,i)][2] for i in range(n-2)] for w in range(4)}
    acc['tiles'].append(n)
    acc['cta total'].append(d(st0,t[(0,LAST)][1]))
    acc['start->PV ws_start done (w0)'].append(d(st0,t[(0,LAST)][2]))
    acc['start->first KFULL pass (w4)'].append(d(st0,K[4][0]))
    acc['last PREADY(w4)->end of epilogue (w0)'].append(d(R[4][n-1],t[(0,LAST)][1]))
    for i in range(3,n-3):
        for w in (4,5):
            acc['score QK+softmax'].append(d(K[w][i],R[w][i]))
            acc['score QK (to scores ready)'].append(d(K[w][i],t[(w,i)][2]))
            acc['score softmax+p store'].append(d(t[(w,i)][2],R[w][i]))
            acc['score KFULL wait'].append(d(R[w][i-1],K[w][i]))
        acc['period (w4 KFULL->KFULL)'].append(d(K[4][i],K[4][i+1]))
        for w in range(4):
            acc['pv PV'].append(d(P[w][i],Dn[w][i]))
            acc['pv refill+copy wait'].append(d(Dn[w][i],L[w][i]))
            acc['pv refill issue (to commit)'].append(d(Dn[w][i],t[(w,i)][3]))
            acc['pv copy wait'].append(d(t[(w,i)][3],L[w][i]))
            if t[(w,i)][4]:
                acc['pv  refill: ids LDS (reorder: from ids fetch end)'].append(d(t[(w,i)][7] or Dn[w][i],t[(w,i)][4]))
                if t[(w,i)][7]: acc['pv  refill: ids fetch first (reorder)'].append(d(Dn[w][i],t[(w,i)][7]))
                acc['pv  refill: 8 LDGSTS'].append(d(t[(w,i)][4],t[(w,i)][5]))
                acc['pv  refill: meta + fetch ids'].append(d(t[(w,i)][5],t[(w,i)][6]))
                acc['pv  refill: commit'].append(d(t[(w,i)][6],t[(w,i)][3]))
            acc['pv PREADY wait'].append(d(L[w][i-1],P[w][i]))
        acc['PV start(i) -> score KFULL pass(i+2)'].append(d(min((P[w][i-2] for w in range(4)), key=lambda x:(x-K[4][0])%M), K[4][i]))
for k,v in acc.items():
    v=sorted(v); print(f"  {k:50s} median {st.median(v):8.0f}  p10 {v[len(v)//10]:8.0f}  p90 {v[9*len(v)//10]:8.0f}  (n={len(v)})")
s=sorted(D)[0]; t=D[s]; st0=min(t[(w,LAST)][0] for w in range(6))
print(f"  slot {s} sm {SM[s]} timeline (cycles from start): tile: score K,R | pv0 P,D,L")
for i in range(0,8):
    a=t.get((4,i)); b=t.get((0,i))
    print(f"   {i}: {d(st0,a[0])} {d(st0,a[1])} | {d(st0,b[0])} {d(st0,b[1])} {d(st0,b[2])}")
