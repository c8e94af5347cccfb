/*
 * The approval protocol of a RunCode run, as the code implements it (see docs/protocol.md, "The
 * models: what is proven", for the table from each step to the Go function that implements it,
 * and for what is left out).
 *
 * Checked by model_test.go: spin -a approval.pml; cc -DSAFETY pan.c; ./pan. Properties:
 *   P1 code starts at most once per approval (an approval is bound to one run id):
 *      assert(starts[r] <= 1) at each start;
 *   P2 code never starts without decisions that verify for its run and digest from as many
 *      distinct reviewers as the quorum (QUORUM, 2 by default) asks:
 *      assert(act_valid[a] == FULL && approved[r] == FULL) at each start;
 *   P3 the workflow accepts only a decision that verifies (first valid decision wins, a wrong
 *      digest is rejected): assert(v) where it accepts one;
 *   P4 an approved run with a live host ends: when nothing can move any more (timeout), every
 *      run that started has ended; every loop of the model consumes a bounded budget, so every
 *      execution reaches that point;
 *   P5 when nobody forged an activity's end or scheduled one, a run that ends with a result
 *      ("ran", or "recovered" from a late result) started its code exactly once and one that
 *      ends "approval unused" never started it;
 *   P6 edits (EDITS, 1 by default): a reviewer's edit replaces the run's code, the approvals of
 *      the code before it stop counting, and no code runs that fewer than QUORUM reviewers
 *      approved as edited: assert(act_valid1[a] == FULL && approved1[r] == FULL) at each start
 *      of edited code (and P2 for the code as it was);
 *   L1 a run that ends "recovered" took a late result that a host signed for this run, and a host
 *      started this run's code: assert(lsig && lrun == r && hsig[r] && starts[r] == 1) where the
 *      workflow takes it;
 *   L2 when the partition timed out an activity whose host lived, ran the code and sent its late
 *      result (not lost), the run ends with a result ("ran" or "recovered"), never "failed",
 *      unless the wait's timer fired first (cut: a fault, the code ran longer than the wait), a
 *      writer ended or scheduled an activity (forged), or a reset ended the run: at the end,
 *      like P4;
 *   L3 when a host died while its run's code ran (its container lives on, the run in its spool),
 *      the run ends with a result, the late result of the worker that adopted it, unless that
 *      late result was lost, the wait's timer fired first, a writer forged an activity's end or a
 *      reset ended the run: at the end, like P4;
 *   L4 when a host died between its claim and the start (the run in its spool at stage
 *      "claimed"), with no other fault, no writer's claim and no forged end, the run never ends
 *      failed ("outcome unknown", a refusal) while its code never started: the adopting worker
 *      released the claim, and the workflow ran a fresh activity (or ended the approval unused):
 *      at the end, like P4.
 *
 * Each -D macro below removes one check of the code; model_test.go shows spin finds a
 * counterexample for each:
 *   NO_HISTORY_READ  the host starts the code right after its claim, reading no history;
 *   NO_SECRET        a release needs no secret: anyone may release a claim it saw;
 *   NO_STARTED_RULE  a host releases its claim after any backend failure, also after the start;
 *   NO_CLAIM_WAIT    the host does not wait for its own claim to show in the history;
 *   NO_VERIFY        the host does not verify the signed decision;
 *   NO_DIGEST_CHECK  the workflow accepts the first decision, whatever digest it names;
 *   NO_HEARTBEAT_TIMEOUT  the sandbox activity has no heartbeat timeout: a run whose host died
 *                    never ends (P4);
 *   NO_HOST_QUORUM   the host verifies the approvals it gets but does not count them against its
 *                    own quorum (a workflow worker whose quorum is 1 gets one approval through);
 *   NO_CODE_DIGEST   the host verifies each approval over the digest the approval names, not
 *                    over the request it received (P6: the approvals of the code before an edit
 *                    run the edited code);
 *   NO_LATE_WAIT     the workflow does not wait for a late result: a timeout ends the run
 *                    "outcome unknown" (L2);
 *   NO_ADOPTION      a host that dies while the code runs spools nothing, so no worker adopts
 *                    its run (L3);
 *   NO_RELEASE       a host that dies between its claim and the start spools nothing, so no
 *                    worker releases its claim (L4);
 *   NO_CLAIM_ORDER   hosts take a timed-out activity for one whose code never started, and its
 *                    claims for stale, wherever its claims stand against its timeout in the
 *                    history (P1: a writer's activity runs the code a partitioned host runs);
 *   NO_LATE_RECEIPT_CHECK  the workflow takes any late result while it waits, signed or not, for
 *                    any run, activity and claim (L1: a writer's made-up result ends the run);
 *   NO_LATE_BINDING  the workflow takes a late result a host signed, for any run, activity and
 *                    claim (L1: after a reset, run 1 takes the result run 0 took).
 */

#define NRUN   2   /* the run, and the run a reset makes */
#define NACT   5   /* sandbox activities, over both runs */
#define HLEN   16  /* events of one run's history that the hosts read */
#define NHOST  2
#define NC     10  /* claim commitments (1..NC-1; 0 is none) */
#define NFL    3   /* signals in flight at once */
#define MAXATT 2   /* contract.RunOptions.StartAttempts (5 by default: 2 shows the retry) */
#ifndef QUORUM
#define QUORUM 2   /* reviewers a run needs (guard.Policy.QuorumFor): 1 or 2 */
#endif
#define FULL ((1 << QUORUM) - 1) /* the approvals of every reviewer a run needs, as a set */
#ifndef EDITS
#define EDITS 1 /* 0: no reviewer edits the code */
#endif

/* firstClaim's answer */
#define FC_OK       1
#define FC_REFUSE   2
#define FC_NOTFOUND 3

/* scratch of one history read (inside one atomic step: kept out of the state) */
hidden byte si, sj, sk;
hidden byte sc_c[HLEN];
hidden byte sc_rel[HLEN];
hidden byte sc_ust[NACT]; /* activity e's code never started, as the history shows it (notStarted) */
hidden byte sm, sn;

/* Budgets of one execution: faults (host crashes, lost, late and duplicated messages, a
 * partition that times out a running activity, a lost late result, a late-result wait that ends
 * before the late result comes) and the namespace writer's actions. */
#ifndef FAULTS
#define FAULTS 2
#endif
#ifndef WACTS
#define WACTS 2
#endif
#ifndef RESETS
#define RESETS 1 /* 0: the writer does not reset the run */
#endif
#define CAN_FAULT (faults < FAULTS)
#define FAULT faults++

/* history events (the workflow's own events that the hosts do not read are left out) */
#define EV_SCHED 1 /* ActivityTaskScheduled of a SandboxRun */
#define EV_CLAIM 2 /* a SandboxClaim signal without secret */
#define EV_REL   3 /* a SandboxClaim signal with the secret of commitment c */

/* activity states, as the server holds them */
#define A_NONE    0
#define A_QUEUED  1
#define A_STARTED 2
#define A_ENDED   3

/* how an activity ended (readRun's activityEnd); K_OPEN while it has not */
#define K_OPEN       0
#define K_DONE       1 /* completed */
#define K_NOTSTARTED 2 /* failed with a retryable IntegrationError: before the code could start */
#define K_FAILED     3 /* failed otherwise: a refusal (ConfigError) or a failure after the start */
#define K_TIMEOUT    4 /* heartbeat or start-to-close timeout */
#define K_S2S        5 /* schedule-to-start timeout: no host took it */

/* how a run ended */
#define W_RAN    1 /* a result */
#define W_UNUSED 2 /* approval unused: not picked up, or every attempt failed before the start */
#define W_FAILED 3 /* a refusal, or outcome unknown (the approval was used) */
#define W_RESET  4 /* reset: a new run took over */
#define W_RECOVERED 5 /* a result, taken from a late result after its activity timed out */

typedef Ev { byte t; byte a; byte c; byte r };
typedef Hist { Ev e[HLEN]; byte n };
Hist hist[NRUN];

/* the server's activities */
byte act_run[NACT];
byte act_state[NACT];
byte act_kind[NACT];
byte act_valid[NACT]; /* the reviewers (a set) whose decisions, signed for its run and digest, its input carries */
byte act_valid1[NACT]; /* the same, of the edited code */
bit  act_ver[NACT];    /* the code its input carries: 0 as started, 1 as a reviewer edited it */
bit  act_orphan[NACT]; /* started, but no host works on it any more (crash, lost answer) */
byte nact;

/* runs */
bit  alive[NRUN];   /* open: signals land, workflow tasks run */
byte approved[NRUN]; /* the reviewers (a set) who signed an approval for this run */
byte approved1[NRUN]; /* the reviewers (a set) who signed an approval of its edited code */
byte starts[NRUN];  /* code starts, counted outside every host */
byte wf_end[NRUN];
byte cur;           /* the newest run */
chan dec[NRUN] = [4] of { byte }; /* decisions sent to a run: reviewer i's (1, 2) verifies, 0 names a wrong digest;
                                     3 is reviewer QUORUM's edit (an approval of the edited code), 4 reviewer 1's approval of the edited code */

/* the network: signals in flight (c != 0), delivered later or lost */
byte fl_c[NFL];
byte fl_r[NFL];
bit  fl_rel[NFL];

byte ncommit;      /* commitments made so far */
bit  revealed[NC]; /* the secret of a commitment is in some history (a release landed) */
bit  forged;       /* the writer ended an activity by id or scheduled one */
byte faults, wacts;

/* the writer's budgets */
bit w_sched, w_end, w_claim, w_rel, w_dec, w_reset, w_late;

/* Late results: a host whose attempt was lost (its activity ended while the code ran) sends the
 * result to its run as a signal, signed over (run, activity, claim commitment, the approvals it
 * verified). sig says a host signed it: a result no host signed has sig 0, and the writer cannot
 * change what a host signed. The signal lands in the run's channel while the run is open. */
#define LCAP 3
chan late[NRUN] = [LCAP] of { byte, byte, byte, byte, bit }; /* run, activity, commitment, approvals, sig */
byte lwait[NRUN];  /* the workflow waits for a late result of activity lwait[r]-1 (0: it does not wait) */
bit  hsig[NRUN];   /* a host that started run r's code signed a late result for it */
bit  lok[NRUN];    /* the partition timed out an activity of run r whose host lived, ran the code and sent its late result, not lost */
bit  cut[NRUN];    /* run r's wait ended before nothing else could move (a fault: the code ran past the wait) */
/* Adoption: a host that dies after its code started leaves the container running and the run in
 * its spool; a worker started again on the host takes the spool and sends the late result. */
byte spool[NACT];  /* the claim commitment of activity a's run, spooled by a host that died after the start (0: none) */
bit  hdied[NRUN];  /* a host died while run r's code ran (its container lives on) */
bit  llost[NRUN];  /* a late result of run r was lost (every delivery failed) */
/* A host that dies after its claim and before the start leaves the run in its spool at stage
 * "claimed"; the adopting worker releases the claim, and the run tries a fresh activity. */
byte uspool[NACT]; /* the claim commitment of activity a, spooled by a host that died before the start (0: none) */
bit  hunst[NRUN];  /* a host died between its claim and the start of run r's code */
byte com_act[NC];  /* the activity a host's claim c named (255: a writer's) */
byte tend[NACT];   /* where in its run's history the server timed activity a out (its history's length then) */
bit  relw[NRUN];   /* a release landed in run r's history (the workflow's wait wakes on it) */
/* the newest genuine late result that landed in a run: the writer saw it and may replay it */
bit  g_sig;
byte g_run, g_act, g_c, g_val;
hidden byte lrun, lact, lc, lval, lsig, sh;

inline append(hr, typ, act, com, field) {
	assert(hist[hr].n < HLEN);
	hist[hr].e[hist[hr].n].t = typ;
	hist[hr].e[hist[hr].n].a = act;
	hist[hr].e[hist[hr].n].c = com;
	hist[hr].e[hist[hr].n].r = field;
	hist[hr].n++;
	if
	:: typ == EV_REL -> relw[hr] = 1
	:: else -> skip
	fi
}

/* deliver lands a signal in run r's history: only while the run is open */
inline deliver(dc, dr, drel, dok) {
	if
	:: alive[dr] ->
		if
		:: drel -> append(dr, EV_REL, 0, dc, dr); revealed[dc] = 1
		:: else -> append(dr, EV_CLAIM, 0, dc, dr)
		fi;
		dok = 1
	:: else -> dok = 0
	fi
}

inline inflight(fc_, fr_, frel_) {
	if
	:: fl_c[0] == 0 -> fl_c[0] = fc_; fl_r[0] = fr_; fl_rel[0] = frel_
	:: else -> if
		:: fl_c[1] == 0 -> fl_c[1] = fc_; fl_r[1] = fr_; fl_rel[1] = frel_
		:: else -> assert(fl_c[2] == 0); fl_c[2] = fc_; fl_r[2] = fr_; fl_rel[2] = frel_
		fi
	fi
}

/* send is claim.send: a SandboxClaim signal; ok says whether the host saw it succeed */
inline send(com, r, rel, ok) {
	if
	:: true -> deliver(com, r, rel, ok)
	:: CAN_FAULT -> FAULT; deliver(com, r, rel, ok); ok = 0 /* recorded, answer lost */
	:: CAN_FAULT -> FAULT; ok = 0                           /* lost */
	:: CAN_FAULT -> FAULT; inflight(com, r, rel); ok = 0   /* late: lands after the error */
	:: CAN_FAULT -> FAULT; inflight(com, r, rel); ok = 1   /* accepted, lands later (the server holds
	                                                          a signal while a workflow task runs) */
	:: CAN_FAULT -> FAULT; deliver(com, r, rel, ok); inflight(com, r, rel) /* and once more */
	fi
}

#define pending(com) (fl_c[0] == com || fl_c[1] == com || fl_c[2] == com)

/* held sets sh when run hr's history holds a claim of run hr with commitment hc (any, if hc is 0)
 * that no release of hr revoked: the workflow's noteClaim and heldClaim */
inline held(hr, hc) {
	sh = 0; si = 0;
	do
	:: si < hist[hr].n ->
		if
		:: hist[hr].e[si].t == EV_CLAIM && hist[hr].e[si].r == hr && (hc == 0 || hist[hr].e[si].c == hc) ->
			sk = 1; sj = 0;
			do
			:: sj < hist[hr].n ->
				if
				:: hist[hr].e[sj].t == EV_REL && hist[hr].e[sj].r == hr && hist[hr].e[sj].c == hist[hr].e[si].c -> sk = 0
				:: else -> skip
				fi;
				sj++
			:: else -> break
			od;
			if
			:: sk -> sh = 1
			:: else -> skip
			fi
		:: else -> skip
		fi;
		si++
	:: else -> break
	od;
	si = 0; sj = 0; sk = 0
}

/* drain drops the late results a closed run holds: nothing reads them any more */
inline drain(dr) {
	do
	:: late[dr] ? _, _, _, _, _
	:: empty(late[dr]) -> break
	od
}

/* finish ends activity act with kind k, if it is still open */
inline finish(fa, fk) {
	if
	:: act_state[fa] == A_QUEUED || act_state[fa] == A_STARTED ->
		act_state[fa] = A_ENDED; act_kind[fa] = fk
	:: else -> skip
	fi
}

/* schedule is an ActivityTaskScheduled of SandboxRun in run r */
inline schedule(sr, sact, svalid) {
	schedule_v(sr, sact, 0, svalid, 0)
}

/* schedule SandboxRun with code sver and the approvals of each code the input carries */
inline schedule_v(sr, sact, sver, svalid, svalid1) {
	assert(nact < NACT);
	sact = nact; nact++;
	act_run[sact] = sr; act_state[sact] = A_QUEUED; act_ver[sact] = sver; act_valid[sact] = svalid; act_valid1[sact] = svalid1;
	append(sr, EV_SCHED, sact, 0, 0)
}

/* the approvals the host verifies of activity x: those signed over the code it carries */
#ifdef NO_CODE_DIGEST
#define HOST_VALID(x) (act_valid[x] | act_valid1[x])
#else
#define HOST_VALID(x) (act_ver[x] == 0 -> act_valid[x] : act_valid1[x])
#endif

/* The workflow (workflows.RunCode): decision, then the sandbox activity, retried while it failed
 * before the code could start; after a heartbeat or start-to-close timeout with a claim held, a
 * bounded wait for the activity's late result. */
proctype Workflow(byte r) {
	byte v, got, a, att;
	bit ver; /* the run's code: 0 as started, 1 as edited (one edit per run) */
	do
	:: dec[r] ? v ->
#ifdef NO_DIGEST_CHECK
		got = FULL; break
#else
		if
		:: v != 0 && v <= QUORUM && ver == 0 && (got & (1 << (v - 1))) == 0 ->
			got = got | (1 << (v - 1)); /* counted (quorum.go: a new reviewer) */
			if
			:: got == FULL -> break
			:: else -> skip
			fi
		:: EDITS && v == 3 && ver == 0 ->
			/* decideEdit: the policy takes the edited request; it becomes the run's code, the
			 * approvals before it stop counting, the editor's is the first of the edited code */
			ver = 1; got = 1 << (QUORUM - 1);
			if
			:: got == FULL -> break
			:: else -> skip
			fi
		:: v == 4 && ver == 1 && (got & 1) == 0 ->
			got = got | 1; /* reviewer 1 approves the edited code */
			if
			:: got == FULL -> break
			:: else -> skip
			fi
		:: else -> skip /* rejected: a wrong digest, a reviewer already counted, a digest of the code before the edit */
		fi
#endif
	:: !alive[r] -> goto out
	od;
	assert(v != 0 && got == FULL); /* P3 */
	att = 1;
sched:
	atomic {
		if
		:: !alive[r] -> goto out
		:: ver == 0 -> schedule(r, a, got)
		:: ver == 1 -> schedule_v(r, a, 1, 0, got) /* withApprovals: the approvals of the edited code */
		fi
	};
	if
	:: act_state[a] == A_ENDED
	:: !alive[r] -> goto out
	fi;
	atomic {
		if
		:: !alive[r] -> goto out
		:: else -> skip
		fi;
		if
		:: act_kind[a] == K_DONE -> wf_end[r] = W_RAN
		:: act_kind[a] == K_NOTSTARTED && att < MAXATT -> att++; goto sched
		:: act_kind[a] == K_NOTSTARTED && att >= MAXATT -> wf_end[r] = W_UNUSED
		:: act_kind[a] == K_S2S -> wf_end[r] = W_UNUSED
		:: act_kind[a] == K_FAILED -> wf_end[r] = W_FAILED
		:: act_kind[a] == K_TIMEOUT ->
			held(r, 0);
			if
			:: !sh && att < MAXATT -> att++; goto sched /* lostattempt.go: no claim held, the code never started */
			:: !sh && att >= MAXATT -> wf_end[r] = W_UNUSED
#ifdef NO_LATE_WAIT
			:: sh -> sh = 0; wf_end[r] = W_FAILED /* outcome unknown */
#else
			:: sh -> sh = 0; lwait[r] = a + 1; relw[r] = 0; goto wait
#endif
			fi
		fi;
		alive[r] = 0; drain(r)
	};
	goto out;
wait:
	/* the late-result wait: the first late result that verifies ends the run with its result */
	do
	:: atomic { late[r] ? lrun, lact, lc, lval, lsig ->
		if
		:: !alive[r] -> lwait[r] = 0; goto out
		:: else -> skip
		fi;
#ifdef NO_LATE_RECEIPT_CHECK
		sh = 1;
#else
#ifdef NO_LATE_BINDING
		sh = lsig;
#else
		/* receipt.Verify against the hosts, CheckRun (run, approvals), the activity id, a held claim */
		held(r, lc);
		sh = sh && lsig && lrun == r && lact == a && lval == got;
#endif
#endif
		if
		:: sh ->
			assert(lsig && lrun == r && hsig[r] && starts[r] == 1); /* L1 */
			wf_end[r] = W_RECOVERED; lwait[r] = 0; alive[r] = 0; drain(r); goto out
		:: else -> skip /* refused: receipt.refused */
		fi;
		sh = 0; lrun = 0; lact = 0; lc = 0; lval = 0; lsig = 0 }
	:: atomic { relw[r] -> relw[r] = 0; held(r, 0);
		/* a release landed: with no claim held any more, the code never started (the worker
		 * that adopted a dead host's spool released its claim): a fresh activity */
		if
		:: !sh && att < MAXATT -> lwait[r] = 0; att++; goto sched
		:: !sh && att >= MAXATT -> wf_end[r] = W_UNUSED; lwait[r] = 0; alive[r] = 0; drain(r); goto out
		:: else -> sh = 0
		fi }
	:: atomic { timeout -> wf_end[r] = W_FAILED; lwait[r] = 0; alive[r] = 0; drain(r); goto out } /* no late result can come any more */
	:: atomic { CAN_FAULT -> FAULT; cut[r] = 1; wf_end[r] = W_FAILED; lwait[r] = 0; alive[r] = 0; drain(r); goto out } /* the wait's timer fires first */
	:: atomic { !alive[r] -> lwait[r] = 0; goto out }
	od;
out:
	skip
}

/* late_result: the host whose activity la ended while its code ran (the server timed it out, or a
 * writer ended it by id: its heartbeat answers "not found") finishes, signs the receipt with its
 * claim's commitment and sends the result to run lr, retrying for a bounded time */
inline late_result(la, lr, lc_) {
	hsig[lr] = 1;
	if
	:: true ->
		if
		:: alive[lr] && len(late[lr]) < LCAP ->
			late[lr] ! lr, la, lc_, HOST_VALID(la), 1;
			g_sig = 1; g_run = lr; g_act = la; g_c = lc_; g_val = HOST_VALID(la)
		:: else -> skip /* the run is closed: dropped */
		fi;
		if
		:: act_kind[la] == K_TIMEOUT -> lok[lr] = 1
		:: else -> skip
		fi
	:: CAN_FAULT -> FAULT; llost[lr] = 1 /* lost: every delivery failed */
	fi
}

/* A sandbox host (activities.SandboxRun on one worker). */
proctype Host(byte h) {
	byte a, r, c, fc, mine;
	bit ok, vis;

end_poll:
	do
	:: atomic {
		if
		:: act_state[0] == A_QUEUED && alive[act_run[0]] -> a = 0
		:: act_state[1] == A_QUEUED && alive[act_run[1]] -> a = 1
		:: act_state[2] == A_QUEUED && alive[act_run[2]] -> a = 2
		:: act_state[3] == A_QUEUED && alive[act_run[3]] -> a = 3
		:: act_state[4] == A_QUEUED && alive[act_run[4]] -> a = 4
		fi;
		act_state[a] = A_STARTED; r = act_run[a];
		if
		:: skip
		:: CAN_FAULT -> FAULT; act_orphan[a] = 1; goto next /* the poll's answer lost */
		fi
	   };

		/* verify: a ConfigError, nothing claimed */
#ifndef NO_VERIFY
		if
#ifdef NO_HOST_QUORUM
		:: HOST_VALID(a) == 0 -> atomic { finish(a, K_FAILED); goto next } /* one verified approval suffices */
#else
		:: HOST_VALID(a) != FULL -> atomic { finish(a, K_FAILED); goto next } /* verifyAdmission: fewer than its own quorum, over the code it received */
#endif
		:: else -> skip
		fi;
#endif
		if
		:: CAN_FAULT -> FAULT; goto crash
		:: skip
		fi;

		/* claim the approval: a fresh commitment */
		atomic { ncommit++; c = ncommit; assert(c < NC); com_act[c] = a; send(c, r, 0, ok) };
		if
		:: !ok -> goto release_notstarted
		:: else -> skip
		fi;
		if
		:: CAN_FAULT -> FAULT; goto crash_claimed
		:: skip
		fi;

#ifndef NO_HISTORY_READ
read:
		/* firstUse: one read of the history (readRun), then firstActivity and firstClaim */
		atomic {
			/* firstActivity: this activity is scheduled and open, every one before it failed
			 * before its code could start */
			mine = 255; si = 0;
			do
			:: si < hist[r].n ->
				if
				:: hist[r].e[si].t == EV_SCHED && hist[r].e[si].a == a && act_state[a] != A_ENDED -> mine = si
				:: else -> skip
				fi;
				si++
			:: else -> break
			od;
			/* notStarted: failed before the start, or timed out with no claim of its own that
			 * came before its end left unreleased (a release comes after its claim) */
			sm = 0;
			do
			:: sm < NACT ->
				sc_ust[sm] = (act_kind[sm] == K_NOTSTARTED);
				if
				:: act_kind[sm] == K_TIMEOUT && act_run[sm] == r ->
					sc_ust[sm] = 1;
#ifndef NO_CLAIM_ORDER
					sn = 0;
					do
					:: sn < tend[sm] && sn < hist[r].n ->
						if
						:: hist[r].e[sn].t == EV_CLAIM && hist[r].e[sn].r == r && com_act[hist[r].e[sn].c] == sm ->
							sj = sn + 1; sk = 0;
							do
							:: sj < hist[r].n -> if :: hist[r].e[sj].t == EV_REL && hist[r].e[sj].r == r && hist[r].e[sj].c == hist[r].e[sn].c -> sk = 1 :: else -> skip fi; sj++
							:: else -> break
							od;
							if
							:: !sk -> sc_ust[sm] = 0
							:: else -> skip
							fi
						:: else -> skip
						fi;
						sn++
					:: else -> break
					od;
#endif
					skip
				:: else -> skip
				fi;
				sm++
			:: else -> break
			od;
			sm = 0; sn = 0; sj = 0; sk = 0;
			if
			:: mine == 255 -> fc = FC_REFUSE
			:: else ->
				si = 0;
				do
				:: si < mine && hist[r].e[si].t == EV_SCHED && !sc_ust[hist[r].e[si].a] -> fc = FC_REFUSE; break
				:: si < mine && !(hist[r].e[si].t == EV_SCHED && !sc_ust[hist[r].e[si].a]) -> si++
				:: si >= mine -> break
				od
			fi;
			if
			:: fc != FC_REFUSE ->
				/* the claims of this run, in order, each released by a later release of its secret */
				si = 0; sk = 0;
				do
				:: si < hist[r].n ->
					if
					:: hist[r].e[si].t == EV_CLAIM && hist[r].e[si].r == r ->
						/* stale: a claim that came after its own activity's timeout never let
						 * code start (its host reads its activity ended): it holds nothing back */
						sc_c[sk] = hist[r].e[si].c;
						sc_rel[sk] = (com_act[sc_c[sk]] != 255 && act_kind[com_act[sc_c[sk]]] == K_TIMEOUT && act_run[com_act[sc_c[sk]]] == r
#ifndef NO_CLAIM_ORDER
							&& si >= tend[com_act[sc_c[sk]]]
#endif
							);
						sk++
					:: hist[r].e[si].t == EV_REL && hist[r].e[si].r == r ->
						sj = 0;
						do
						:: sj < sk -> if :: sc_c[sj] == hist[r].e[si].c -> sc_rel[sj] = 1 :: else -> skip fi; sj++
						:: else -> break
						od
					:: else -> skip
					fi;
					si++
				:: else -> break
				od;
				/* holds: the history shows this host's claim */
				vis = 0; sj = 0;
				do
				:: sj < sk -> if :: sc_c[sj] == c -> vis = 1 :: else -> skip fi; sj++
				:: else -> break
				od;
				/* firstClaim: every claim before this host's own was released */
				fc = FC_NOTFOUND; sj = 0;
				do
				:: sj < sk && sc_c[sj] == c && !sc_rel[sj] -> fc = FC_OK; break
				:: sj < sk && sc_c[sj] != c && !sc_rel[sj] -> fc = FC_REFUSE; break
				:: sj < sk && sc_rel[sj] -> sj++
				:: sj >= sk -> break
				od;
#ifdef NO_CLAIM_WAIT
				if
				:: fc == FC_NOTFOUND -> fc = FC_OK
				:: else -> skip
				fi;
				vis = 1;
#endif
				skip
			:: else -> vis = 1 /* a refusal needs no claim */
			fi;
			si = 0; sj = 0; sk = 0; mine = 0
		};
		if
		:: !vis && pending(c) -> !pending(c); fc = 0; goto read /* wait, read again */
		:: !vis -> skip /* give up: claimVisibleWait */
		:: vis -> skip
		fi;
		if
		:: fc == FC_OK -> fc = 0; goto checked
		:: fc == FC_REFUSE -> fc = 0; goto refuse
		:: fc == FC_NOTFOUND -> fc = 0; goto release_notstarted /* a retryable IntegrationError */
		fi;

refuse:
		/* a ConfigError: release the claim (a refusal stays one whatever the release did) */
		atomic { send(c, r, 1, ok); finish(a, K_FAILED); goto next };
#endif

checked:
		if
		:: CAN_FAULT -> FAULT; goto crash_claimed
		:: skip
		fi;
		/* the backend: it fails before the code could start, or the code starts */
		if
		:: goto release_notstarted
		:: atomic {
			starts[r]++;
			assert(starts[r] <= 1);          /* P1 */
			assert(act_ver[a] != 0 || act_valid[a] == FULL && approved[r] == FULL);  /* P2 */
			assert(act_ver[a] != 1 || act_valid1[a] == FULL && approved1[r] == FULL) /* P6 */
		   }
		fi;
		if
		:: CAN_FAULT -> FAULT; goto crash_started
		:: skip
		fi;
		if
		:: atomic {
			if
			:: act_state[a] == A_ENDED -> late_result(a, r, c) /* the attempt was lost while the code ran */
			:: else ->
				if
				:: true -> finish(a, K_DONE)
				:: CAN_FAULT -> FAULT; act_orphan[a] = 1 /* the answer is lost */
				fi
			fi;
			goto next
		   }
		:: skip /* the backend fails after the start: not retryable */
		fi;
#ifdef NO_STARTED_RULE
		atomic { send(c, r, 1, ok) };
#endif
		atomic { finish(a, K_FAILED); goto next };

release_notstarted:
		/* claim.release, then a retryable IntegrationError */
		if
		:: CAN_FAULT -> FAULT; goto crash_claimed
		:: skip
		fi;
		atomic { send(c, r, 1, ok) };
		atomic {
			if
			:: true -> finish(a, K_NOTSTARTED)
			:: CAN_FAULT -> FAULT; act_orphan[a] = 1
			fi;
			goto next
		};
crash_started:
		/* the host dies while the code runs: its container runs on, and the run is in its spool */
		hdied[r] = 1;
#ifndef NO_ADOPTION
		spool[a] = c;
#endif
		goto crash;
crash_claimed:
		/* the host dies after its claim, before the code started: the run is in its spool at
		 * stage "claimed", with the claim's secret */
		hunst[r] = 1;
#ifndef NO_RELEASE
		uspool[a] = c;
#endif
crash:
		/* the host dies and restarts with nothing: its activity is left to the timeouts */
		act_orphan[a] = 1;
next:
		atomic { a = 0; r = 0; c = 0; ok = 0; vis = 0; fc = 0 }
	od
}

/* A worker started again on a host that died adopts the runs of its spool (activities.Adopt):
 * once the code ended (here: once the server timed the activity out, before which the run holds
 * the signal unread) it signs the receipt with the spooled claim's commitment and sends the late
 * result. It starts nothing. */
#define ADOPT(x) \
	:: atomic { spool[x] != 0 && act_state[x] == A_ENDED -> late_result(x, act_run[x], spool[x]); spool[x] = 0 }

/* ... and releases the claim of a run its spool holds at stage "claimed": the code never went. */
#define UADOPT(x) \
	:: atomic { uspool[x] != 0 -> send(uspool[x], act_run[x], 1, uok); uspool[x] = 0; uok = 0 }

proctype Adopter() {
	bit uok;
end_adopt:
	do
	ADOPT(0) ADOPT(1) ADOPT(2) ADOPT(3) ADOPT(4)
	UADOPT(0) UADOPT(1) UADOPT(2) UADOPT(3) UADOPT(4)
	od
}

/* The network delivers a late signal, or loses it. */
proctype Network() {
	byte i;
	bit ok;
end_net:
	do
	:: atomic {
		if
		:: fl_c[0] != 0 -> i = 0
		:: fl_c[1] != 0 -> i = 1
		:: fl_c[2] != 0 -> i = 2
		fi;
		if
		:: true -> deliver(fl_c[i], fl_r[i], fl_rel[i], ok)
		:: skip /* lost */
		fi;
		fl_c[i] = 0; fl_r[i] = 0; fl_rel[i] = 0; ok = 0; i = 0
	   }
	od
}

#ifdef NO_HEARTBEAT_TIMEOUT
#define HEARTBEAT_TIMEOUT 0
#else
#define HEARTBEAT_TIMEOUT 1
#endif

#define TIMER(x) \
	:: atomic { act_state[x] == A_QUEUED && CAN_FAULT -> FAULT; finish(x, K_S2S) } \
	:: atomic { HEARTBEAT_TIMEOUT && act_state[x] == A_STARTED && act_orphan[x] -> finish(x, K_TIMEOUT); tend[x] = hist[act_run[x]].n } \
	:: atomic { act_state[x] == A_STARTED && !act_orphan[x] && CAN_FAULT -> FAULT; finish(x, K_TIMEOUT); tend[x] = hist[act_run[x]].n }

/* The server's timers: a schedule-to-start timeout of a queued activity, a heartbeat timeout of
 * one no host works on any more, or (once, a partition) of one a host still runs. */
proctype Timers() {
end_timers:
	do
	TIMER(0) TIMER(1) TIMER(2) TIMER(3) TIMER(4)
	od
}

/* A namespace writer: it answers workflow tasks (schedules SandboxRun with the run's genuine
 * input, or a forged one), completes or fails activities by id, sends claim signals and releases
 * of secrets it saw, sends a decision with a wrong digest, sends a late result no host signed or
 * replays a genuine one it saw (a reset also gives run 1 the late result run 0 got), and resets
 * the run. */
/* the writer completes or fails activity x by id */
#define WEND(x) \
	:: atomic { !w_end && wacts < WACTS && (act_state[x] == A_QUEUED || act_state[x] == A_STARTED) -> \
		w_end = 1; wacts++; forged = 1; \
		if \
		:: act_kind[x] = K_NOTSTARTED /* failed by id, typed as a failure before the start */ \
		:: act_kind[x] = K_FAILED \
		:: act_kind[x] = K_DONE       /* completed by id */ \
		fi; \
		act_state[x] = A_ENDED }

#ifdef NO_SECRET
#define KNOWS_SECRET(x) 1
#else
#define KNOWS_SECRET(x) revealed[x]
#endif

/* LATE_WRITER: a writer that only sends late results and resets run 0 once it ended (a run that
 * took a late result gives it to run 1): a budget that reaches a replay into another run */
#ifdef LATE_WRITER
#define LATE_RESET (!alive[0])
#else
#define LATE_RESET 1
#endif

proctype Writer() {
	byte a, i;
end_writer:
	do
#ifndef LATE_WRITER
	:: atomic { !w_sched && wacts < WACTS && alive[cur] -> w_sched = 1; wacts++; forged = 1;
		if
		:: schedule(cur, a, approved[cur]) /* the genuine input, copied */
		:: approved1[cur] != 0 -> schedule_v(cur, a, 1, 0, approved1[cur]) /* the genuine input of the edited code */
		:: EDITS -> schedule_v(cur, a, 1, approved[cur], 0) /* the edited code with the approvals of the code before it */
		:: schedule(cur, a, 0)           /* a forged input */
		:: schedule(cur, a, 1)           /* one genuine approval: a workflow worker whose quorum is 1 */
		fi }
	WEND(0) WEND(1) WEND(2) WEND(3) WEND(4)
	:: atomic { !w_claim && wacts < WACTS && alive[cur] && ncommit < NC - 1 -> w_claim = 1; wacts++;
		ncommit++; com_act[ncommit] = 255; append(cur, EV_CLAIM, 0, ncommit, cur) }
	:: atomic { !w_rel && wacts < WACTS && alive[cur] -> w_rel = 1; wacts++;
		/* a release of a commitment in the history: it needs the secret, which only a
		 * release already there reveals */
		i = 0;
		do
		:: i < hist[cur].n && hist[cur].e[i].t == EV_CLAIM && KNOWS_SECRET(hist[cur].e[i].c) ->
			append(cur, EV_REL, 0, hist[cur].e[i].c, cur); break
		:: i < hist[cur].n -> i++
		:: i >= hist[cur].n -> break
		od;
		i = 0 }
	:: atomic { !w_dec && wacts < WACTS -> w_dec = 1; wacts++;
		if
		:: dec[cur] ! 0 /* a wrong digest */
		:: dec[cur] ! 1 /* reviewer 1's decision again */
		fi }
#endif
	:: atomic { !w_late && wacts < WACTS && lwait[cur] != 0 && len(late[cur]) < LCAP -> w_late = 1; wacts++;
		/* a late result while the run waits for one (one that lands before the wait is read by
		 * it the same way) */
		if
		:: late[cur] ! cur, lwait[cur] - 1, ncommit, FULL, 0 /* made up: no host signed it */
		:: g_sig -> late[cur] ! g_run, g_act, g_c, g_val, 1 /* a genuine one it saw: of another run or activity, or again */
		fi }
	:: atomic { RESETS && !w_reset && wacts < WACTS && cur == 0 && LATE_RESET -> w_reset = 1; wacts++;
		/* reset to a workflow task of run 0: run 0 ends, run 1 gets run 0's signals (claims
		 * keep their run id; the decision, signed for run 0, does not verify in run 1) */
		if
		:: alive[0] -> alive[0] = 0; wf_end[0] = W_RESET; drain(0)
		:: else -> skip
		fi;
		alive[1] = 1; cur = 1;
		if
		:: g_sig && g_run == 0 -> late[1] ! g_run, g_act, g_c, g_val, 1 /* run 0's late result, signed for run 0 */
		:: else -> skip
		fi;
		i = 0;
		do
		:: i < hist[0].n ->
			if
			:: hist[0].e[i].t != EV_SCHED ->
				append(1, hist[0].e[i].t, 0, hist[0].e[i].c, hist[0].e[i].r)
			:: else -> skip
			fi;
			i++
		:: else -> break
		od;
		i = 0;
		dec[1] ! 0;
		run Workflow(1);
		/* a reviewer approves the new run */
		approved[1] = FULL;
		dec[1] ! 1;
		if
		:: QUORUM > 1 -> dec[1] ! 2
		:: else -> skip
		fi }
	od
}

/* P4, P5 and L2, when nothing can move any more (and no run waits: its wait ends then). */
proctype Final() {
	byte r;
	atomic {
		timeout && lwait[0] == 0 && lwait[1] == 0 ->
		r = 0;
		do
		:: r <= cur ->
			assert(wf_end[r] != 0); /* P4 */
			assert(forged || wf_end[r] != W_RAN && wf_end[r] != W_RECOVERED || starts[r] == 1); /* P5 */
			assert(forged || wf_end[r] != W_UNUSED || starts[r] == 0); /* P5 */
#ifdef SHOW_RAN
			assert(wf_end[r] != W_RAN);    /* not a check: shows a run can end with a result */
#endif
#ifdef SHOW_UNUSED
			assert(wf_end[r] != W_UNUSED); /* not a check: shows a run can end with the approval unused */
#endif
#ifdef SHOW_RECOVERED
			assert(wf_end[r] != W_RECOVERED); /* not a check: shows a run can end with a late result */
#endif
			/* L2: a late result the partition's host sent, not lost, ends its run with a result */
			assert(!lok[r] || forged || cut[r] || wf_end[r] == W_RESET || wf_end[r] == W_RAN || wf_end[r] == W_RECOVERED);
			/* L3: a run whose host died while its code ran ends with a result, its late result
			 * sent by the worker that adopted it, unless that was lost */
			assert(!hdied[r] || llost[r] || forged || cut[r] || wf_end[r] == W_RESET || wf_end[r] == W_RAN || wf_end[r] == W_RECOVERED);
			/* L4: a run whose host died between its claim and the start, with no other fault or
			 * writer's claim, never ends failed ("outcome unknown", a refusal) without its code
			 * having started: the adopting worker released the claim and a fresh activity ran */
#ifndef NO_LATE_WAIT
			/* (it needs the wait too, when the release comes after the timeout: NO_LATE_WAIT's
			 * counterexample is L2's) */
			assert(!hunst[r] || faults > 1 || forged || w_claim || wf_end[r] != W_FAILED || starts[r] > 0);
#endif
			r++
		:: else -> break
		od
	}
}

init {
	atomic {
		alive[0] = 1;
		if
		:: approved[0] = FULL;
			dec[0] ! 1; /* the reviewers' decisions */
			if
			:: QUORUM > 1 -> dec[0] ! 2
			:: else -> skip
			fi
		:: EDITS ->
			/* reviewer 1 approves the code as started, reviewer QUORUM approves it edited,
			 * reviewer 1 approves the edited code */
			approved1[0] = FULL;
			if
			:: QUORUM > 1 -> approved[0] = 1; dec[0] ! 1; dec[0] ! 3; dec[0] ! 4
			:: else -> dec[0] ! 3
			fi
		fi;
		run Workflow(0);
		run Host(0);
		run Host(1);
		run Network();
		run Timers();
		run Adopter();
		run Writer();
		run Final()
	}
}
