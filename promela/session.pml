/*
 * A session's cells, as the code implements them (workflows/session.go's cell loop and runCell;
 * activities/session.go's SessionCell and its admission, activities/admit.go). See doc.go for
 * the table from each step to the Go function that implements it, and for what is left out.
 *
 * Checked by model_test.go like approval.pml. Properties:
 *   S1 a cell runs at most once: assert(starts[..] <= 1) at each start, per run and index;
 *   S2 a cell runs only under a decision its reviewer signed for that run, that index and the
 *      chain over the results of the cells that really ran before it in that sandbox (what the
 *      reviewer read is what ran): assert at each start; and under a quorum (QUORUM, 2 by
 *      default) only with approvals so signed by as many distinct reviewers: assert at each
 *      start;
 *   S3 a session with a live host ends: when nothing can move any more (timeout), every session
 *      run that started has ended;
 *   S4 a cell starts only after its host's claim is in the history (the signal was recorded; the
 *      host does not read the history back): assert at each start.
 *
 * Each -D macro below removes checks of the code; model_test.go shows spin finds a counterexample:
 *   NO_VERIFY       the host does not verify the decision's signature;
 *   NO_HOST_CHAIN   the host takes the chain the input carries (no equality check with its own,
 *                   the digest computed over the input's);
 *   NO_INDEX        the host does not require the cell's index above the last it admitted;
 *   NO_USED         the host does not remember the approval ids it used;
 *   NO_HOST_QUORUM  the host verifies the approvals the input carries but does not count them
 *                   against its own quorum (a writer's workflow worker whose quorum is 1 gets one
 *                   reviewer's approval of a cell through);
 *   NO_HEARTBEAT_TIMEOUT  a cell activity whose host died is never timed out (S3);
 *   NO_CLAIM        the host starts the cell without signalling its claim (S4).
 */

#define NRUN  2  /* the session's run, and the run a reset makes */
#define NIDX  2  /* cells the orchestrator submits, one after the other */
#define NACT  6  /* cell activities, over both runs */
#ifndef QUORUM
#define QUORUM 2 /* reviewers each cell needs (guard.Policy.QuorumFor): 1 or 2 */
#endif
#define NSIG  (2 * NIDX * QUORUM + 1) /* reviewers' approvals (1..NSIG-1; 0 is none, or forged) */

#ifndef FAULTS
#define FAULTS 2
#endif
#ifndef WACTS
#define WACTS 2
#endif
#ifndef LOWER
#define LOWER 1 /* 0: the writer's workflow worker does not lower the quorum */
#endif
#define CAN_FAULT (faults < FAULTS)
#define CAN_ACT   (wacts < WACTS)

/* activity states, as the server holds them */
#define A_NONE    0
#define A_QUEUED  1
#define A_STARTED 2
#define A_ENDED   3

/* how a cell activity ended */
#define K_OPEN    0
#define K_DONE    1 /* a result */
#define K_REFUSED 2 /* refused by the host, or failed before the cell could start: nothing ran */
#define K_LOST    3 /* SandboxLost: no sandbox for the run on this host, or an earlier outcome unknown */
#define K_TIMEOUT 4 /* heartbeat or schedule-to-start timeout */

/* how a session run ended */
#define W_DONE  1 /* every cell submitted ended; closed */
#define W_LOST  2 /* the sandbox was lost, or a cell's outcome is unknown */
#define W_RESET 3 /* reset: a new run took over */

/* the server's cell activities */
byte act_run[NACT];
byte act_idx[NACT];
byte act_sig[NACT];   /* the first approval the input carries */
byte act_sig2[NACT];  /* its second (0: none) */
byte act_n[NACT];     /* how many approvals the input carries */
byte act_chain[NACT]; /* the chain the input carries */
byte act_state[NACT];
byte act_kind[NACT];
bit  act_res[NACT];   /* the result its completion reports */
bit  act_orphan[NACT];
bit  claimed[NACT];   /* the host's claim for the activity is in the history */
byte nact;
byte queued;  /* activities in A_QUEUED */
byte orphans; /* started activities no host answers for */

/* the reviewers' approvals: each binds a run, an index and a chain, and names its reviewer */
byte sig_rev[NSIG];
byte sig_run[NSIG];
byte sig_idx[NSIG];
byte sig_chain[NSIG];
byte nsig = 1;

/* the sandbox of each run, on its one host */
bit  sb_alive[NRUN];
bit  sb_unknown[NRUN]; /* an earlier cell's outcome is unknown: it takes no more cells */
byte sb_last[NRUN];
byte sb_chain[NRUN];   /* the chain over the results the host returned: 1, then chain*2+result */
bit  sb_used[NRUN * NSIG];
byte starts[NRUN * (NIDX + 2)]; /* per run and index (a writer's may be NIDX + 1) */

/* the session runs */
bit  alive[NRUN];
byte wf_end[NRUN];
byte wf_chain[NRUN];   /* the chain over the results in the workflow's status */
byte ran[NRUN];        /* cells the workflow recorded a result for */
byte cur;

byte faults, wacts;
bit  w_dup, w_forge, w_replay, w_complete, w_fail, w_reset, w_lower;

inline schedule(sr, sidx, ssig, ssig2, sn, schain, sa) {
	assert(nact < NACT);
	sa = nact; nact++;
	act_run[sa] = sr; act_idx[sa] = sidx; act_sig[sa] = ssig; act_sig2[sa] = ssig2; act_n[sa] = sn; act_chain[sa] = schain;
	act_state[sa] = A_QUEUED; queued++
}

/* reviewer sr_'s approval of cell sidx_ of run sr over chain sc_ */
inline sign(srev_, sr_, sidx_, sc_) {
	assert(nsig < NSIG);
	sig_rev[nsig] = srev_; sig_run[nsig] = sr_; sig_idx[nsig] = sidx_; sig_chain[nsig] = sc_;
	nsig++
}

/* approval s_ verifies for run r_, cell i_ and chain c_ */
#define VALID(s_, r_, i_, c_) (s_ != 0 && sig_run[s_] == r_ && sig_idx[s_] == i_ && sig_chain[s_] == c_)

inline finish(fa, fk, fres) {
	if
	:: act_state[fa] == A_QUEUED || act_state[fa] == A_STARTED ->
		if
		:: act_state[fa] == A_QUEUED -> queued--
		:: act_state[fa] == A_STARTED && act_orphan[fa] -> orphans--
		:: else -> skip
		fi;
		act_state[fa] = A_ENDED; act_kind[fa] = fk; act_res[fa] = fres
	:: else -> skip
	fi
}

/* The Session workflow: for each cell, a reviewer signs over what the status shows, then the cell
 * activity goes to the host that keeps the sandbox; a result moves the chain on, a refusal ends
 * the cell and the session goes on, anything else ends the session. */
proctype Workflow(byte r) {
	byte idx = 1;
	byte a, k, s1;
	wf_chain[r] = 1;
	sb_alive[r] = 1; sb_chain[r] = 1; /* SessionOpen: the host opened the run's sandbox */
	do
	:: idx > NIDX -> wf_end[r] = W_DONE; break
	:: idx <= NIDX && !alive[r] -> wf_end[r] = W_RESET; break
	:: idx <= NIDX && alive[r] ->
		/* the reviewers' approvals, counted (session_quorum.go countCell: a reviewer already
		 * counted is refused), then the cell activity with every approval; a writer may take
		 * any one of them (Writer) */
		atomic {
			s1 = nsig; sign(1, r, idx, wf_chain[r]);
			if
			:: QUORUM == 1 -> schedule(r, idx, s1, 0, 1, wf_chain[r], a)
			:: QUORUM > 1 ->
				sign(2, r, idx, wf_chain[r]);
				schedule(r, idx, s1, nsig - 1, 2, wf_chain[r], a)
			fi;
			s1 = 0
		}
		(act_state[a] == A_ENDED || !alive[r]);
		if
		:: !alive[r] -> wf_end[r] = W_RESET; break
		:: else -> skip
		fi;
		k = act_kind[a];
		if
		:: k == K_DONE -> wf_chain[r] = wf_chain[r] * 2 + act_res[a]; ran[r]++
		:: k == K_REFUSED -> skip
		:: else -> wf_end[r] = W_LOST; break
		fi;
		idx++
	od
}

/* The sandbox host (SessionCell, cellSubject): it takes any cell activity on its queue. A crash
 * loses every sandbox it keeps, and the activity it worked on. */
proctype Host() {
	byte a, r, s, c, left;
	bit res;
	end:
	do
	:: atomic {
		queued > 0 ->
		a = 0; left = queued;
		do
		:: act_state[a] == A_QUEUED -> break
		:: act_state[a] == A_QUEUED && left > 1 -> left--; a++ /* or a later one */
		:: act_state[a] != A_QUEUED -> a++
		od;
		act_state[a] = A_STARTED; queued--;
		r = act_run[a]; s = act_sig[a];
#ifdef NO_HOST_CHAIN
		c = act_chain[a];
#else
		c = sb_chain[r];
#endif
		if
		:: !sb_alive[r] || sb_unknown[r] -> finish(a, K_LOST, 0)
#ifndef NO_INDEX
		:: sb_alive[r] && !sb_unknown[r] && act_idx[a] <= sb_last[r] -> finish(a, K_REFUSED, 0)
#endif
#ifndef NO_USED
		:: sb_alive[r] && !sb_unknown[r] && (sb_used[r * NSIG + s] || act_sig2[a] != 0 && sb_used[r * NSIG + act_sig2[a]]) -> finish(a, K_REFUSED, 0)
#endif
#ifndef NO_HOST_CHAIN
		:: sb_alive[r] && !sb_unknown[r] && act_chain[a] != sb_chain[r] -> finish(a, K_REFUSED, 0)
#endif
#ifndef NO_HOST_QUORUM
		/* verifyApprovals: fewer approvals than this host's own quorum */
		:: sb_alive[r] && !sb_unknown[r] && act_n[a] < QUORUM -> finish(a, K_REFUSED, 0)
#endif
#ifndef NO_VERIFY
		/* verifyApprovals: each approval must verify, by distinct reviewers */
		:: sb_alive[r] && !sb_unknown[r] &&
		   !(VALID(s, r, act_idx[a], c) &&
		     (act_n[a] < 2 || VALID(act_sig2[a], r, act_idx[a], c) && sig_rev[act_sig2[a]] != sig_rev[s])) -> finish(a, K_REFUSED, 0)
#endif
		:: else ->
			/* admitted: the index and the approval are used from here on, whatever the claim
			 * does; the claim signal goes to the history (no read back) */
			sb_last[r] = act_idx[a]; sb_used[r * NSIG + s] = 1;
			if
			:: act_sig2[a] != 0 -> sb_used[r * NSIG + act_sig2[a]] = 1
			:: else -> skip
			fi;
#ifndef NO_CLAIM
			if
			:: claimed[a] = 1
			:: CAN_FAULT -> faults++;
				if
				:: claimed[a] = 1 /* recorded, its answer lost */
				:: skip
				fi;
				finish(a, K_REFUSED, 0) /* not sent: nothing runs */
			fi;
#endif
			if
			:: act_state[a] == A_STARTED ->
				starts[r * (NIDX + 2) + act_idx[a]]++;
				assert(starts[r * (NIDX + 2) + act_idx[a]] <= 1);                                     /* S1 */
				assert(s != 0 && sig_run[s] == r && sig_idx[s] == act_idx[a] && sig_chain[s] == sb_chain[r]); /* S2 */
				assert(QUORUM == 1 || VALID(act_sig2[a], r, act_idx[a], sb_chain[r]) && sig_rev[act_sig2[a]] != sig_rev[s]); /* S2, a quorum */
				assert(claimed[a]);                                                                    /* S4 */
				if
				:: res = 0
				:: res = 1
				fi;
				sb_chain[r] = sb_chain[r] * 2 + res;
				if
				:: finish(a, K_DONE, res)
				:: CAN_FAULT -> faults++; act_orphan[a] = 1; orphans++ /* the answer is lost */
				:: CAN_FAULT -> faults++; act_orphan[a] = 1; orphans++; sb_alive[0] = 0; sb_alive[1] = 0 /* crash */
				fi
			:: else -> skip
			fi
		fi
	   }
	:: atomic { CAN_FAULT -> faults++; sb_alive[0] = 0; sb_alive[1] = 0 } /* a crash between cells */
	od
}

/* The server's timers: a started activity no host answers for times out (heartbeat). */
proctype Server() {
	byte a;
	end:
	do
	:: atomic {
#ifdef NO_HEARTBEAT_TIMEOUT
		false ->
#else
		orphans > 0 ->
#endif
		a = 0;
		do
		:: act_orphan[a] && act_state[a] == A_STARTED -> break
		:: else -> a++
		od;
		finish(a, K_TIMEOUT, 0)
	   }
	od
}

/* The namespace writer: schedules cell activities (a copy of a genuine input, a forged decision,
 * a genuine decision for another index), completes or fails activities by id, resets the run. */
proctype Writer() {
	byte a, b, i;
	end:
	do
	:: atomic { CAN_ACT && !w_dup && nact > 0 && nact < NACT ->
		w_dup = 1; wacts++;
		select(b : 0 .. nact - 1);
		schedule(act_run[b], act_idx[b], act_sig[b], act_sig2[b], act_n[b], act_chain[b], a) }
	:: atomic { CAN_ACT && !w_forge && nact < NACT ->
		w_forge = 1; wacts++;
		select(i : 1 .. NIDX);
		schedule(cur, i, 0, 0, QUORUM, wf_chain[cur], a) }
	:: atomic { CAN_ACT && !w_replay && nact > 0 && nact < NACT ->
		w_replay = 1; wacts++;
		select(b : 0 .. nact - 1);
		schedule(act_run[b], act_idx[b] + 1, act_sig[b], act_sig2[b], act_n[b], wf_chain[act_run[b]], a) }
	:: atomic { LOWER && CAN_ACT && !w_lower && nsig > 1 && nact < NACT ->
		/* a writer's workflow worker whose quorum is 1: one reviewer's genuine approval, alone
		 * or given twice */
		w_lower = 1; wacts++;
		select(b : 1 .. nsig - 1);
		if
		:: schedule(sig_run[b], sig_idx[b], b, 0, 1, sig_chain[b], a)
		:: schedule(sig_run[b], sig_idx[b], b, b, 2, sig_chain[b], a)
		fi }
	:: atomic { CAN_ACT && !w_complete && nact > 0 ->
		w_complete = 1; wacts++;
		select(b : 0 .. nact - 1);
		if
		:: i = 0
		:: i = 1
		fi;
		finish(b, K_DONE, i) }
	:: atomic { CAN_ACT && !w_fail && nact > 0 ->
		w_fail = 1; wacts++;
		select(b : 0 .. nact - 1);
		finish(b, K_REFUSED, 0) }
	:: atomic { CAN_ACT && !w_reset && cur == 0 ->
		w_reset = 1; wacts++;
		alive[0] = 0; cur = 1; alive[1] = 1;
		run Workflow(1) }
	od
}

init {
	atomic {
		alive[0] = 1;
		run Workflow(0);
		run Host();
		run Server();
		run Writer()
	}
	timeout ->
	/* S3: nothing can move: every session run that started has ended */
	assert(wf_end[0] != 0 && (cur == 0 || wf_end[1] != 0));
#ifdef SHOW_RAN
	assert(ran[0] != NIDX); /* some execution runs every cell */
#endif
	skip
}
