/*
 * room.pml - kvx's room protocol (src/core) as built, for spin, with the fix
 * of finding 17(a) (issue 17): a prefill instance concludes a room only on
 * the decode instance's word (AGREED or VERDICT), never on its own round
 * alone. Its EFFA half is agree_outcome() since f5c9f09 (a SUCCESS minimum
 * unfinal until AGREED is heard); its agree_unheld half is
 * agree_conclude_unheld() -> sender_conclude_unheld() since c693567: a
 * prefill room some TP rank lacks fails, tells the decode ranks its record
 * (VERDICT from the prefill, sender_send_verdict(); the decode takes it in
 * receiver_on_verdict(), prefill_failed) and waits for the decode's word.
 * The code before both is the broken variant ownround=1 (SPIN_OWNROUND=1);
 * the model before the prefill's VERDICT is nopverdict=1 (SPIN_NOPVERDICT=1).
 *
 * One room between a prefill and a decode instance of TP 2: ranks 0,1 are
 * prefill TP 0,1 (processes Prefill(p)), ranks 2,3 decode TP 0,1 (Decode(d));
 * prefill p talks to and writes decode p (plan_pair() for equal TP; -DCROSS
 * makes every pair talk). Agree(i) is each instance's agreement loop.
 * Data is abstracted to bits (posted / in flight / landed), failure records
 * to a code CODE(stage, kind, origin rank) whose order KEY() is
 * failure_compare()'s. Control messages travel in per-pair FIFO channels
 * (one UCX endpoint per pair delivers eager active messages in order) and are
 * delayed arbitrarily; puts are in flight until the flush that covers them.
 *
 * Step by step, what models what:
 *   Decode "opens"        kvx_room_recv_open() -> receiver_open() ->
 *                         receiver_grant() (PREALLOC; injected PREALLOC fault)
 *                         -> room_api_opened() (peer_fail_if_lost,
 *                         peer_break_if_broken)
 *   Prefill "opens"       kvx_room_send_open() -> sender_open(),
 *                         room_api_replay() of early messages, room_api_opened()
 *   chunk                 kvx_room_send_chunk() -> sender_chunk() ->
 *                         sender_maybe_start() (START), sender_pump_all()
 *   p_on_prealloc         sender_on_prealloc() (ACCEPT, WAIT; FAIL+DRAINED
 *                         when the room already failed)
 *   p_pump                sender_pump(): puts, sender_put_aux(), sender_flush()
 *   flush complete / land sender_flushed() -> sender_target_done() (DONE) or
 *                         sender_send_drained(); puts land by then
 *   p_fail / d_fail       room_fail() -> room_notify() / room_notify_early(),
 *                         sender_drain() / receiver_on_fail()
 *   p_handle              protocol_room_msg() on the prefill: FAIL,
 *                         sender_on_received(), sender_on_verdict(),
 *                         sender_on_agreed() (AGREED: decode agreed SUCCESS)
 *   early[p]              protocol_keep_early(), protocol_nothing_in_flight()
 *   d_handle              protocol_room_msg() nonce check with
 *                         protocol_pre_grant_fail() (FAIL0 = FAIL with nonce 0),
 *                         receiver_on_msg(), receiver_source_complete()
 *   d_on_verdict          receiver_on_verdict(): a VERDICT from a prefill
 *                         rank fails a decode room not agreed yet, or marks
 *                         one SUCCESS here prefill_failed (pfail) with that
 *                         record; CONTRIB/HASREC then count it FAILED
 *   p_send_verdict        sender_send_verdict(): the prefill's record, as a
 *                         VERDICT, to each decode rank whose grant (nonce)
 *                         it knows (from sender_conclude_unheld() and from
 *                         agree_conclude() for a FAILED slot whose root is
 *                         not the decode's verdict)
 *   d_complete/d_succeed  receiver_all_done(), receiver_check_aux(),
 *                         receiver_succeed() (RECEIVED)
 *   d_update_pages        receiver_update_pages(); D_DRAIN: receiver_tick()
 *                         quarantine after KVX_DRAIN_TIMEOUT
 *   deadlines             room_tick() -> room_expire() (state deadlines, the
 *                         unopened room's, none once delivered);
 *                         P_LONGWAIT: sender_may_conclude()'s 10 peer timeouts
 *   loss detection        peer_tick() -> peer_mark_lost() -> peer_fail_rooms(),
 *                         peer_break_instance() for a TP sibling: a decode
 *                         rank concludes FAILED and sends VERDICT; a prefill
 *                         rank fails what it was still sending and waits
 *   p_conclude_broken     sender_conclude_broken(): a broken prefill
 *                         instance's room concludes with the decode's word
 *                         (AGREED, VERDICT), or FAILED when none can come
 *                         (cut off) or after 10 peer timeouts (room_tick)
 *   CONTRIB/MAYCON        agree_sample(), sender_may_conclude() (a failed
 *                         rank waits for the decode's word, also when a
 *                         decode rank is lost; a held verdict counts FAILED;
 *                         a decode room prefill_failed counts FAILED)
 *   HEARD/CUTOFF          agree_heard(), sender_cut_off(): what a prefill
 *                         rank heard of the decode's outcome (phase A's
 *                         second MIN)
 *   EFFA                  agree_outcome(): a slot's outcome after A
 *   d_agreed / d_verdict  agree_send_verdict() (AGREED / VERDICT) from
 *                         agree_conclude() and peer_break_instance(); the
 *                         code sends each prefill rank one AGREED per round
 *                         naming all its rooms (agree_flush_agreed()), here
 *                         one room: sent in the same step
 *   Agree(i)              kvx_agree_start()/kvx_agree_test(): see below
 *   agree_unheld / TEXP   agree_assign() -> agree_conclude_unheld(): a room
 *                         one TP rank holds unslotted for KVX_TP_TIMEOUT
 *                         (AGREE_FRESH_EXPIRED, agree_post_bc()) while its
 *                         sibling never opened it (NOOPEN) or closed it
 *                         before the instance agreed (ECLOSE; a closed room
 *                         stays in the agreement only 2 x KVX_TP_TIMEOUT,
 *                         room_agree_pending()) fails with the record of the
 *                         rank that lacks it; a decode rank concludes and
 *                         sends VERDICT; a prefill rank
 *                         (sender_conclude_unheld()) sends the decode ranks
 *                         its VERDICT and waits for the decode's word
 *   incarnations (NINC)   a concluded room closed (kvx_room_close()) and the
 *                         id opened again, the decode with new pages: the
 *                         nonce of receiver_open() in every message, the
 *                         decode's check in protocol_room_msg(), the prefill's
 *                         p_recv: protocol_next_incarnation() (a newer grant
 *                         kept for the next room, room_api_create() hands it
 *                         over), sender_msg_stale() with sender_bury()'s dead
 *                         nonces, sender_learn_nonce()
 *   skew (MAXS)           rounds out of step: agree_tick() -> peer_break_tp()
 *                         on each TP rank (or the sibling's MSG_TP_BREAK,
 *                         protocol_dispatch()), one record as if by the lower
 *                         TP rank; rooms opened later break at open
 *                         (peer_break_if_broken()); then as a lost sibling
 *   crash                 any one rank stops at any point (FAULT_KILL, kill -9)
 *
 * Properties (each an assert with a "VIOLATION <property>" line):
 *   agreement   check_pair(): two live ranks that concluded the room (the same
 *               incarnation of it) agree on its state, whatever instance
 *               they are in (a rank whose application closed the room
 *               before it was agreed, ECLOSE, is exempt: it no longer
 *               observes it). With ownround or -DNO_AGREED a decode rank that
 *               concluded by breaking its instance is exempt unless
 *               -DSTRICT: that prefill may have concluded SUCCESS on every
 *               decode rank's RECEIVED before;
 *   reason      both FAILED: one root cause on all four ranks (both
 *               instances), except a prefill that had to conclude alone
 *               after 10 peer timeouts (documented in sender_may_conclude);
 *   integrity   conclude(): a FAILED outcome's reason was recorded at its
 *               origin (orig[]); finality: a concluded outcome never changes;
 *   validity    d_succeed()/conclude(): SUCCESS only with every page and the
 *               aux row of that incarnation landed;
 *   progress    conclude(): in a run without faults (every rank opens and
 *               keeps the room, no injected failure, early deadline, skew or
 *               crash) no rank concludes FAILED: a deadline then fires only
 *               where the protocol is stuck (issue 17 item 1: a new
 *               incarnation's grant dropped);
 *   pages       check_release()/land(): no put in flight when pages are
 *               released (a released page may be granted again at once), and
 *               none of an earlier incarnation lands once the id is reopened;
 *   termination init: in every state where nothing can move and no deadline
 *               is left, every live rank that opened and kept the room
 *               concluded it and every live decode
 *               rank's pages settled (released or quarantined). With the
 *               cycle search of run-spin.sh (pan -DNP -l, no progress label:
 *               any reachable cycle is reported) finding none, every
 *               execution is finite and ends in such a state: every live
 *               rank concludes whatever the scheduling, so under weak
 *               fairness too;
 *   promptness  with prompt=1 (SPIN_PROMPT=1) the deadlines longer than
 *               KVX_TP_TIMEOUT never fire: the state deadlines of
 *               room_expire() and the shadow room's (KVX_BOOTSTRAP_TIMEOUT,
 *               KVX_WAITING_TIMEOUT, KVX_TRANSFER_TIMEOUT: 300 s by default,
 *               against 30 s; the 10 peer timeouts, 15 s, and the drain
 *               timeout, 5 s, still do). Termination then says that every
 *               rank concludes within rounds and KVX_TP_TIMEOUT, and in
 *               conclude() a FAILED outcome of a run where a rank never
 *               opens the room (NOOPEN) must carry that rank's record
 *               (agree_conclude_unheld(); VIOLATION reason): the scheduler
 *               contract of kvx.h ("not at KVX_BOOTSTRAP_TIMEOUT of a decode
 *               rank waiting for the pages of the prefill rank that lacks
 *               the room").
 * Broken variants (must fail): -DNO_VERDICT_PRECEDENCE (agree_root_op before
 * c804017), -DNO_OPEN_BREAK (room_api_opened before peer_break_if_broken),
 * -DNO_AGREED (before AGREED: the decode agrees SUCCESS, a decode rank dies
 * before its RECEIVED reaches its prefill rank, and the prefill instance
 * concluded FAILED; scenario crash-d1), -DNO_PREFILL_WORD (before a broken
 * prefill instance waited for the decode's word: it concluded FAILED at
 * once while the decode agreed SUCCESS; scenario crash-p1), -DFAILED_FIRST
 * (agree_outcome() before the decode's agreed SUCCESS beat a FAILED
 * minimum: a prefill rank that heard AGREED is outvoted by a sibling that
 * failed by losing its decode rank and met its 10 peer timeouts; scenario
 * broken-failedfirst, agreement). The early 10 peer timeouts fire only
 * when no message of a live decode rank is in flight to the prefill
 * (DP_QUIET: a live rank's word arrives within them). Chosen at run
 * time, sharing the default verifier: ownround=1 (SPIN_OWNROUND=1; src/core
 * as built today, finding 17(a)): a prefill instance concludes SUCCESS on
 * its own round once every rank holds the room SUCCESS (every RECEIVED), and
 * agree_conclude_unheld() concludes a prefill room FAILED at once with its
 * own record -- while the decode instance may agree FAILED (a decode rank
 * closed the room early: scenario broken-own, agreement) or name another
 * root cause (a prefill rank never opened it: broken-own-unheld, reason);
 * nonext=1 (SPIN_NONEXT=1; before protocol_next_incarnation()): a prefill
 * rank still holding the room ignores the grant of the decode's next
 * incarnation as "another incarnation", and both wait out the bootstrap
 * deadline (broken-next, progress); nopverdict=1 (SPIN_NOPVERDICT=1; the
 * model before c693567 and 7e7c971): a prefill sends no VERDICT
 * (sender_send_verdict()) and a decode room has no prefill_failed, so with
 * a prefill TP rank never opening, a prefill rank whose room is SUCCESS
 * when it finds it unheld tells the decode nothing (its decode rank holds
 * the room SUCCESS, and would drop a FAIL), and the decode rank of the
 * rank that lacks the room concludes only at its bootstrap deadline
 * (broken-pverdict, with prompt=1: termination). ownround=1 has no
 * prefill VERDICT either (src/core before both).
 *
 * Not modelled: the prefill's own deadline for a room SUCCESS on it whose
 * decode word never comes (HEARD_SILENT, agree_silence(), since 7e7c971:
 * it needs a decode instance that stops running rounds, and every live
 * decode rank here runs rounds whenever one can change something, so no
 * state has the prefill SUCCESS, the decode silent and nothing else to
 * move); a closed room kept for a late grant (room_answers_grants());
 * incarnations with faults; a skew together with another fault.
 *
 * Scenario bounds (MAXF, FRANKS, ...) are -D flags or, at run time, SPIN_*
 * environment variables (init); tests/model/run-spin.sh runs the scenarios.
 */
#ifndef MAXF
#define MAXF 1
#endif
#ifndef MAXC
#define MAXC 1
#endif
#ifndef MAXT
#define MAXT 1
#endif
#ifndef CROSS
#define CROSS 0
#endif
/* Which ranks (bit r) may fail by injection (FRANKS), meet a deadline early
 * (TRANKS) or crash (CRANKS): each run bounds its faults by count and rank. */
#ifndef FRANKS
#define FRANKS 15
#endif
#ifndef TRANKS
#define TRANKS 15
#endif
#ifndef CRANKS
#define CRANKS 15
#endif
#ifndef NOOPEN
#define NOOPEN 0
#endif
#ifndef ECLOSE
#define ECLOSE 0
#endif
#ifndef NINC
#define NINC 1
#endif
/* MAXS: rounds out of step (the application of one TP rank starts a round
 * more than its sibling), at most MAXS times in all, on the instances of
 * SINST (bit 0 prefill, bit 1 decode) */
#ifndef MAXS
#define MAXS 0
#endif
#ifndef SINST
#define SINST 3
#endif
/* Broken rules chosen at run time (SPIN_OWNROUND, SPIN_NONEXT), so that
 * they share the default model's verifier: see "Broken variants". */
#ifndef OWNROUND
#define OWNROUND 0
#endif
#ifndef NONEXT
#define NONEXT 0
#endif
#ifndef NOPVERDICT
#define NOPVERDICT 0
#endif
/* PROMPT=1: the deadlines longer than KVX_TP_TIMEOUT never fire (see
 * "promptness") */
#ifndef PROMPT
#define PROMPT 0
#endif
#define CAP 6
#ifdef CHUNK_AT_OPEN
#define CHUNK_OPEN 1
#else
#define CHUNK_OPEN 0
#endif

#define FAILED 0
#define BOOT 1
#define WAIT 2
#define XFER 3
#define SUCC 4

#define INUSE 0
#define DRAINING 1
#define RELEASED 2
#define QUAR 3

#define S_BOOT 1
#define S_PREALLOC 2
#define S_WAIT 3
#define S_POST 4
#define S_AUX 5
#define S_COMPL 6
#define S_XFER 7
#define S_AGREE 9
#define S_ABORT 10

#define K_ERR 0
#define K_TIMEOUT 1
#define K_LOST 2
#define K_ABORT 3

#define H_ROUND 1
#define H_BREAK 2
#define H_WORD 3
#define H_UNHELD 4

#define NOS 255

mtype = { PREALLOC, ACCEPT, START, DONE, FAIL, FAIL0, DRAINED, RECEIVED, VERDICT, AGREED };

byte st[4];
bit uopen[4];
byte bfail[4];
byte rec[4];
bit alive[4];
bit lost[16];
bit agreed[4];
byte agst[4];
byte how[4];
bit lone[4];
byte nf, nt, ncrash;
/* The scenario's bounds: MAXF etc. at spin -a time, or at run time from the
 * environment (SPIN_MAXF etc., read by init): one compiled verifier serves
 * every scenario of tests/model/run-spin.sh. */
byte maxf, maxt, maxc, franks, tranks, cranks;
/* NOOPEN: bit r, rank r's application never opens the room (a request its
 * scheduler dropped); ECLOSE: bit r, rank r's application may close the room
 * once it is SUCCESS here, before its instance agreed (and the agreement
 * forgot it: room_agree_pending() keeps a closed room only 2 x KVX_TP_TIMEOUT) */
byte noopen, eclose, maxs, sinst, nskew;
bit ownround, nonext, nopverdict, prompt;
/* skew[i]: instance i's rounds are out of step (no round completes any
 * more); tpb[r]: rank r broke its instance for it (agree_tick() ->
 * peer_break_tp(), or the sibling's MSG_TP_BREAK: the same record, made as
 * if by the lower TP rank) */
bit skew[2], tpb[4];
bit orig[200];

bit chunk[2], started[2], verdict[2], dsucc[2], longwait[2], pbroken[2];
bit granted[4], nk[4], posted[4], auxp[4], flushing[4], done_sent[4], received[4], drained_sent[4];
bit inD[4], inA[4], landD[4];
bit accepted[4], sdone[4], sdrained[4];
byte pages[2];
bit dgranted[2], landA[2];
/* pfail[dd]: decode rank dd's room is prefill_failed (receiver_on_verdict()) */
bit pfail[2];

byte ph[4], cA[4], wA[4], bR[4], sA[4], lastS[4];
bit hA[4], bH[4], bV[4], slot[4], lw[4], prevEff[2];
/* closed[r]: rank r's application closed the room before its instance agreed
 * (ECLOSE); texp[r]: rank r held the room unslotted for KVX_TP_TIMEOUT while
 * its sibling did not (agree_post_bc()'s AGREE_FRESH_EXPIRED), eA[r] its
 * sample in a round */
bit closed[4], texp[4], eA[4];
/* Incarnations (NINC 2: the application of each rank closes the room once
 * concluded and opens the id again, the decode with new pages). A decode
 * room's incarnation is its nonce (receiver_open(): rank, then a count),
 * here inc+1; every message carries it: a decode rank's its own, a prefill
 * rank's the one its grant named (tnon[E(p,dd)], 0 before: FAIL0). A
 * prefill rank buries its closed room's nonces (sender_bury(): pdead).
 * h*: what a rank concluded in its previous incarnation, for the checks. */
byte ninc;
bit inc[4];
byte tnon[4], pdead[4];
byte hagst[4], hrec[4], hhow[4];
bit hlone[4], hland[2];

chan pd[4] = [CAP] of { mtype, byte, byte };
chan dp[4] = [CAP] of { mtype, byte, byte };
chan early[2] = [CAP] of { mtype, byte, byte, byte };

#define TERM(r) (st[r] == FAILED || st[r] == SUCC)
#define E(p,dd) ((p)*2+(dd))
#if CROSS
#define TALKS(p,dd) 1
#else
#define TALKS(p,dd) ((p) == (dd))
#endif
#define WRITES(p,dd) ((p) == (dd))
#define LOST(r,q) lost[(r)*4+(q)]
#define CODE(stg, kind, r) (1 + (r) + 4*(kind) + 16*(stg))
#define KEY(c) ((((c)-1)/16)*4 + (((c)-1)%4))
#define ORIGIN(c) (((c)-1)%4)
#define RSTAGE(r) (st[r] == BOOT -> S_BOOT : (st[r] == WAIT -> S_WAIT : S_XFER))
#define ALLG(p) ((!TALKS(p,0) || granted[E(p,0)]) && (!TALKS(p,1) || granted[E(p,1)]))
#define ALLDONE(p) ((!TALKS(p,0) || done_sent[E(p,0)]) && (!TALKS(p,1) || done_sent[E(p,1)]))
#define ALLRECV(p) ((!TALKS(p,0) || received[E(p,0)]) && (!TALKS(p,1) || received[E(p,1)]))
#define DELIVERED(p) (uopen[p] && ALLDONE(p))
#define ALLACC(dd) ((!TALKS(0,dd) || accepted[E(0,dd)]) && (!TALKS(1,dd) || accepted[E(1,dd)]))
#define LOSTT(p) ((TALKS(p,0) && LOST(p,2)) || (TALKS(p,1) && LOST(p,3)))
#ifndef NO_AGREED
/* sender_may_conclude(): a failed rank waits for the decode's word (VERDICT,
 * or AGREED through a sibling) even when a decode rank is lost: the decode
 * may have agreed SUCCESS, and its verdict names the root cause both
 * instances report; agree_outcome() concludes FAILED when no rank can hear */
#define MAYCON(p) (verdict[p] || !uopen[p] || st[p] != FAILED || longwait[p])
#else
/* before AGREED: any lost decode rank let a failed prefill rank conclude */
#define MAYCON(p) (verdict[p] || !uopen[p] || st[p] != FAILED || LOSTT(p) || longwait[p])
#endif
/* sender_cut_off(): every decode rank this prefill rank talks to is lost */
#define CUTOFF(p) ((!TALKS(p,0) || LOST(p,2)) && (!TALKS(p,1) || LOST(p,3)))
/* agree_heard(): 0 HEARD_AGREED, 1 HEARD_CAN, 2 HEARD_NOTHING (the model's
 * -1/0/1 shifted by one); always 1 on the decode instance */
#define HEARD(r) ((r) < 2 -> (dsucc[r] -> 0 : (CUTOFF(r) -> 2 : 1)) : 1)
#ifndef NO_AGREED
/* agree_sample(): a prefill rank holding the decode's verdict counts FAILED
 * (even if SUCCESS here); one still waiting counts as the state it failed in */
#define CONTRIB(r) (((r) < 2 && verdict[r]) -> FAILED : (((r) < 2 && !MAYCON(r)) -> bfail[r] : \
  (((r) >= 2 && pfail[((r)-2)%2]) -> FAILED : st[r])))
#define LWONLY(r) ((r) < 2 && st[r] == FAILED && !verdict[r] && longwait[r])
#define HASREC(r) (st[r] == FAILED || ((r) < 2 && verdict[r]) || ((r) >= 2 && pfail[((r)-2)%2]))
#else
#define CONTRIB(r) (((r) < 2 && !MAYCON(r)) -> bfail[r] : (((r) >= 2 && pfail[((r)-2)%2]) -> FAILED : st[r]))
#define LWONLY(r) ((r) < 2 && st[r] == FAILED && !verdict[r] && !LOSTT(r) && longwait[r])
#define HASREC(r) (st[r] == FAILED || ((r) >= 2 && pfail[((r)-2)%2]))
#endif
/* Deadlines, in the order room_tick() checks them; each fires early (any
 * time, at most maxt in all) or when nothing else can happen. */
#define P_DEADLINE(p) (!prompt && alive[p] && uopen[p] && !TERM(p) && !DELIVERED(p))
#define P_SHADOW_DEADLINE(p) (!prompt && alive[p] && !uopen[p] && st[p] == BOOT && len(early[p]) > 0)
#ifndef NOLONE
#define P_LONGWAIT(p) (alive[p] && uopen[p] && st[p] == FAILED && !verdict[p] && !longwait[p])
#else
#define P_LONGWAIT(p) 0
#endif
/* 10 x KVX_PEER_TIMEOUT is long: by then every message a live decode rank
 * sent has arrived (one that cannot arrive makes the rank lost), so the
 * early long wait fires only with none in flight to a prefill rank. */
#define DP_QUIET ((!alive[2] || (len(dp[E(0,0)]) == 0 && len(dp[E(1,0)]) == 0)) && \
  (!alive[3] || (len(dp[E(0,1)]) == 0 && len(dp[E(1,1)]) == 0)))
#define D_DEADLINE(r) (!prompt && alive[r] && uopen[r] && !TERM(r))
#define P_WORDWAIT(p) (alive[p] && pbroken[p] && uopen[p] && !agreed[p])
/* agree_post_bc(): rank r has held the room unslotted for KVX_TP_TIMEOUT
 * (AGREE_FRESH_EXPIRED) while its live sibling does not hold it */
#define TEXP(r) (alive[r] && alive[(r)^1] && uopen[r] && !closed[r] && !slot[r] && !agreed[r] && !texp[r] && \
  (!uopen[(r)^1] || closed[(r)^1]))
#ifndef NODRAINTIMEOUT
#define D_DRAIN(dd) (alive[2+dd] && pages[dd] == DRAINING)
#else
#define D_DRAIN(dd) 0
#endif
#define ANY_DEADLINE (P_DEADLINE(0) || P_DEADLINE(1) || P_SHADOW_DEADLINE(0) || P_SHADOW_DEADLINE(1) || \
  P_LONGWAIT(0) || P_LONGWAIT(1) || D_DEADLINE(2) || D_DEADLINE(3) || D_DRAIN(0) || D_DRAIN(1) || \
  P_WORDWAIT(0) || P_WORDWAIT(1) || TEXP(0) || TEXP(1) || TEXP(2) || TEXP(3))
#define PBR(r) ((r) < 2 && pbroken[(r) % 2])
#define FRESH(r) (uopen[r] && !closed[r] && !slot[r] && !agreed[r])
#define FINALC(r) (CONTRIB(r) == FAILED || CONTRIB(r) == SUCC)
#define READY(r) (FRESH(r) || (slot[r] && (FINALC(r) || HEARD(r) != 1)))
#define SIG(r) ((slot[r] -> (FINALC(r) -> 16 + CONTRIB(r) : 15) : (FRESH(r) -> 1 : 0)) + 32*HEARD(r) + 128*texp[r])
#define MINA(r,s) (cA[r] < cA[s] -> cA[r] : cA[s])
#define MINW(r,s) (wA[r] < wA[s] -> wA[r] : wA[s])
/* agree_outcome(): the slot's outcome after A */
#if defined(NO_AGREED)
#define EFFA(r,s) MINA(r,s)
#else
/* The fix of 17(a): the decode instance's word is final. On a prefill
 * instance a SUCCESS minimum is not final (XFER: the slot stays) until some
 * rank heard the decode's AGREED (MINW 0); a FAILED minimum needs a rank
 * holding the decode's VERDICT (CONTRIB) or one that concluded alone after
 * 10 peer timeouts. Only when no rank can hear any decode rank of the room
 * (MINW 2: every one lost, no decode rank left to disagree) does a SUCCESS
 * minimum conclude. As built (ownround, finding 17(a)): a prefill instance
 * whose ranks all hold the room SUCCESS (every RECEIVED came) concludes
 * SUCCESS on its own round, before the decode instance agreed -- which may
 * then agree FAILED. */
#ifdef FAILED_FIRST
/* agree_outcome() before the decode's word beat a FAILED minimum (broken
 * variant broken-failedfirst): a prefill rank that heard the decode agree
 * SUCCESS is outvoted by a sibling that concluded FAILED alone after 10 peer
 * timeouts, and the instances disagree. */
#define EFFA(r,s) (MINA(r,s) == FAILED -> FAILED : (MINW(r,s) == 0 -> SUCC : \
  (MINA(r,s) == SUCC -> (((r) >= 2 || MINW(r,s) == 2 || ownround) -> SUCC : XFER) : \
  (MINW(r,s) == 2 -> FAILED : MINA(r,s)))))
#else
/* The decode decides: its agreed SUCCESS, heard by any prefill rank, beats
 * a FAILED minimum of the prefill instance (agree_outcome()). */
#define EFFA(r,s) (MINW(r,s) == 0 -> SUCC : (MINA(r,s) == FAILED -> FAILED : \
  (MINA(r,s) == SUCC -> (((r) >= 2 || MINW(r,s) == 2 || ownround) -> SUCC : XFER) : \
  (MINW(r,s) == 2 -> FAILED : MINA(r,s)))))
#endif
#endif

inline set_state(ss_r, ss_s) {
  if
  :: !TERM(ss_r) && ss_s > st[ss_r] -> st[ss_r] = ss_s
  :: else -> skip
  fi
}

inline to_d(td_p, td_dd, td_m, td_c) {
  to_dn(td_p, td_dd, td_m, td_c, (td_m == FAIL0 -> 0 : tnon[E(td_p,td_dd)]))
}

inline to_dn(td_p, td_dd, td_m, td_c, td_n) {
  if
  :: alive[2+td_dd] -> assert(nfull(pd[E(td_p,td_dd)])); pd[E(td_p,td_dd)]!td_m,td_c,td_n;
     printf("MSC: P%d sends %e(%d) to D%d\n", td_p, td_m, td_c, td_dd)
  :: else -> skip
  fi
}

inline to_p(tp_dd, tp_p, tp_m, tp_c) {
  if
  :: alive[tp_p] -> assert(nfull(dp[E(tp_p,tp_dd)])); dp[E(tp_p,tp_dd)]!tp_m,tp_c,inc[2+tp_dd]+1;
     printf("MSC: D%d sends %e(%d) to P%d\n", tp_dd, tp_m, tp_c, tp_p)
  :: else -> skip
  fi
}

inline mark(m_r, m_c) {
  if
  :: ORIGIN(m_c) == m_r -> orig[m_c] = 1
  :: else -> skip
  fi
}

inline p_send_drained(psd_p, psd_dd) {
  if
  :: !drained_sent[E(psd_p,psd_dd)] -> drained_sent[E(psd_p,psd_dd)] = 1; to_d(psd_p, psd_dd, DRAINED, 0)
  :: else -> skip
  fi
}

inline p_drain(pd_p) {
  if
  :: !granted[E(pd_p,pd_p)] && nk[E(pd_p,pd_p)] -> p_send_drained(pd_p, pd_p)
  :: !granted[E(pd_p,pd_p)] && !nk[E(pd_p,pd_p)] -> skip
  :: granted[E(pd_p,pd_p)] && (done_sent[E(pd_p,pd_p)] || drained_sent[E(pd_p,pd_p)] || flushing[E(pd_p,pd_p)]) -> skip
  :: granted[E(pd_p,pd_p)] && !done_sent[E(pd_p,pd_p)] && !drained_sent[E(pd_p,pd_p)] && !flushing[E(pd_p,pd_p)] && !posted[E(pd_p,pd_p)] ->
     p_send_drained(pd_p, pd_p)
  :: granted[E(pd_p,pd_p)] && !done_sent[E(pd_p,pd_p)] && !drained_sent[E(pd_p,pd_p)] && !flushing[E(pd_p,pd_p)] && posted[E(pd_p,pd_p)] ->
     flushing[E(pd_p,pd_p)] = 1; printf("MSC: P%d flushes its puts to D%d (drain)\n", pd_p, pd_p)
  fi
}

inline p_fail(pf_p, pf_c) {
  if
  :: TERM(pf_p) -> skip
  :: else ->
     rec[pf_p] = pf_c; mark(pf_p, rec[pf_p]); bfail[pf_p] = st[pf_p]; st[pf_p] = FAILED;
     printf("MSC: P%d room FAILED in state %d, reason %d (stage %d kind %d origin rank %d)\n", pf_p, bfail[pf_p], pf_c, (pf_c-1)/16, ((pf_c-1)%16)/4, (pf_c-1)%4);
     if
     :: uopen[pf_p] ->
        if
        :: TALKS(pf_p,0) -> to_d(pf_p, 0, (nk[E(pf_p,0)] -> FAIL : FAIL0), rec[pf_p])
        :: else -> skip
        fi;
        if
        :: TALKS(pf_p,1) -> to_d(pf_p, 1, (nk[E(pf_p,1)] -> FAIL : FAIL0), rec[pf_p])
        :: else -> skip
        fi;
        p_drain(pf_p)
     :: else ->
        if
        :: early[pf_p]??<PREALLOC,_,0,nn> -> to_dn(pf_p, 0, FAIL, rec[pf_p], nn)
        :: else -> skip
        fi;
        if
        :: early[pf_p]??<PREALLOC,_,1,nn> -> to_dn(pf_p, 1, FAIL, rec[pf_p], nn)
        :: else -> skip
        fi
     fi
  fi
}

/* sender_send_verdict(): this rank's record, as a VERDICT, to each decode
 * rank of the room whose grant (nonce) it knows; nopverdict: none */
inline p_send_verdict(psv_p) {
  if
  :: !nopverdict && !ownround ->
     if
     :: TALKS(psv_p,0) && nk[E(psv_p,0)] -> to_d(psv_p, 0, VERDICT, rec[psv_p])
     :: else -> skip
     fi;
     if
     :: TALKS(psv_p,1) && nk[E(psv_p,1)] -> to_d(psv_p, 1, VERDICT, rec[psv_p])
     :: else -> skip
     fi
  :: else -> skip
  fi
}

inline p_maybe_succeed(pms_p) {
  if
  :: !TERM(pms_p) && started[pms_p] && chunk[pms_p] && ALLDONE(pms_p) && ALLRECV(pms_p) -> st[pms_p] = SUCC; printf("MSC: P%d room SUCCESS\n", pms_p)
  :: else -> skip
  fi
}

inline p_target_done(ptd_p, ptd_dd) {
  done_sent[E(ptd_p,ptd_dd)] = 1;
  if
  :: WRITES(ptd_p,ptd_dd) -> to_d(ptd_p, ptd_dd, DONE, 0)
  :: else -> skip
  fi;
  p_maybe_succeed(ptd_p)
}

inline p_pump(pp_p, pp_dd) {
  if
  :: TALKS(pp_p,pp_dd) && !TERM(pp_p) && granted[E(pp_p,pp_dd)] && !done_sent[E(pp_p,pp_dd)] && !flushing[E(pp_p,pp_dd)] ->
     if
     :: WRITES(pp_p,pp_dd) && chunk[pp_p] && !posted[E(pp_p,pp_dd)] -> posted[E(pp_p,pp_dd)] = 1; inD[E(pp_p,pp_dd)] = 1; printf("MSC: P%d posts its page puts to D%d\n", pp_p, pp_dd)
     :: else -> skip
     fi;
     if
     :: chunk[pp_p] && started[pp_p] && !WRITES(pp_p,pp_dd) -> p_target_done(pp_p, pp_dd)
     :: chunk[pp_p] && started[pp_p] && WRITES(pp_p,pp_dd) && !auxp[E(pp_p,pp_dd)] ->
        auxp[E(pp_p,pp_dd)] = 1;
        if
        :: inA[E(pp_p,pp_dd)] = 1
        :: nf < maxf && (franks & (1 << pp_p)) -> nf++; printf("MSC: P%d aux put dropped (injected)\n", pp_p)
        fi;
        flushing[E(pp_p,pp_dd)] = 1; printf("MSC: P%d posts the aux put and flushes (D%d)\n", pp_p, pp_dd)
     :: else -> skip
     fi
  :: else -> skip
  fi
}

inline p_maybe_start(pms_p) {
  if
  :: !started[pms_p] && !TERM(pms_p) && ALLG(pms_p) && chunk[pms_p] ->
     started[pms_p] = 1; set_state(pms_p, XFER);
     if
     :: TALKS(pms_p,0) -> to_d(pms_p, 0, START, 0)
     :: else -> skip
     fi;
     if
     :: TALKS(pms_p,1) -> to_d(pms_p, 1, START, 0)
     :: else -> skip
     fi
  :: else -> skip
  fi
}

inline p_pump_all(ppa_p) {
  p_pump(ppa_p, 0); p_pump(ppa_p, 1)
}

inline p_on_prealloc(pop_p, pop_dd, pop_n) {
  if
  :: granted[E(pop_p,pop_dd)] -> skip
  :: else ->
     nk[E(pop_p,pop_dd)] = 1; tnon[E(pop_p,pop_dd)] = pop_n;
     if
     :: TERM(pop_p) ->
        granted[E(pop_p,pop_dd)] = 1; to_d(pop_p, pop_dd, FAIL, rec[pop_p]);
        if
        :: WRITES(pop_p,pop_dd) -> p_send_drained(pop_p, pop_dd)
        :: else -> skip
        fi
     :: else ->
        granted[E(pop_p,pop_dd)] = 1;
        to_d(pop_p, pop_dd, ACCEPT, 0);
        if
        :: ALLG(pop_p) -> set_state(pop_p, WAIT)
        :: else -> skip
        fi;
        p_maybe_start(pop_p); p_pump_all(pop_p)
     fi
  fi
}

inline p_handle(ph_p, ph_m, ph_c, ph_dd, ph_n) {
  if
  :: ph_m == FAIL ->
     p_fail(ph_p, ph_c);
     if
     :: !granted[E(ph_p,ph_dd)] -> nk[E(ph_p,ph_dd)] = 1; tnon[E(ph_p,ph_dd)] = ph_n /* sender_learn_nonce() */
     :: else -> skip
     fi;
     p_drain(ph_p)
  :: ph_m == PREALLOC -> p_on_prealloc(ph_p, ph_dd, ph_n)
  :: ph_m == RECEIVED ->
     if
     :: !received[E(ph_p,ph_dd)] -> received[E(ph_p,ph_dd)] = 1; p_maybe_succeed(ph_p)
     :: else -> skip
     fi
  :: ph_m == AGREED -> dsucc[ph_p] = 1 /* sender_on_agreed() */
  :: ph_m == VERDICT ->
     if
     :: !TERM(ph_p) -> p_fail(ph_p, ph_c)
     :: else -> skip
     fi;
     if
     :: !agreed[ph_p] -> rec[ph_p] = ph_c
     :: else -> skip
     fi;
     verdict[ph_p] = 1
  fi
}

/* protocol_room_msg() on a prefill rank: a message (pr_m, pr_c) from decode
 * rank pr_dd about that rank's room incarnation pr_n. */
#define NEXTINC(p,dd,n) (uopen[p] && nk[E(p,dd)] && (n) > tnon[E(p,dd)])
#define DEAD(p,dd,n) ((n) != 0 && !(uopen[p] && nk[E(p,dd)] && tnon[E(p,dd)] == (n)) && pdead[E(p,dd)] == (n))
#define OTHER(p,dd,n) ((n) != 0 && uopen[p] && nk[E(p,dd)] && tnon[E(p,dd)] != (n))
inline p_keep(pk_p, pk_m, pk_c, pk_dd, pk_n) {
  early[pk_p]!pk_m,pk_c,pk_dd,pk_n;
  if
  :: pk_m == FAIL -> to_dn(pk_p, pk_dd, DRAINED, 0, pk_n) /* protocol_nothing_in_flight() */
  :: else -> skip
  fi
}

inline p_recv(pr_p, pr_m, pr_c, pr_dd, pr_n) {
  if
  /* protocol_next_incarnation(): the decode rank closed the id and opened
   * it again before this rank closed its room: a grant (or failure) of the
   * newer incarnation is kept for the room opened next with the id */
  :: NEXTINC(pr_p, pr_dd, pr_n) && (pr_m == PREALLOC || pr_m == FAIL) ->
     if
     :: !nonext -> printf("MSC: P%d keeps %e of D%d's next incarnation\n", pr_p, pr_m, pr_dd); p_keep(pr_p, pr_m, pr_c, pr_dd, pr_n)
     /* before (nonext): sender_msg_stale() == 2, "ignoring a PREALLOC ...
      * about another incarnation of the room" */
     :: nonext -> printf("MSC: P%d ignores %e of another incarnation\n", pr_p, pr_m)
     fi
  /* sender_msg_stale() == 1: about a room this rank closed (a late RECEIVED, AGREED) */
  :: !(NEXTINC(pr_p, pr_dd, pr_n) && (pr_m == PREALLOC || pr_m == FAIL)) && DEAD(pr_p, pr_dd, pr_n) -> skip
  /* sender_msg_stale() == 2 */
  :: !(NEXTINC(pr_p, pr_dd, pr_n) && (pr_m == PREALLOC || pr_m == FAIL)) && !DEAD(pr_p, pr_dd, pr_n) && OTHER(pr_p, pr_dd, pr_n) ->
     printf("MSC: P%d ignores %e of another incarnation\n", pr_p, pr_m)
  :: !(NEXTINC(pr_p, pr_dd, pr_n) && (pr_m == PREALLOC || pr_m == FAIL)) && !DEAD(pr_p, pr_dd, pr_n) && !OTHER(pr_p, pr_dd, pr_n) ->
     if
     :: !uopen[pr_p] -> p_keep(pr_p, pr_m, pr_c, pr_dd, pr_n)
     :: else -> p_handle(pr_p, pr_m, pr_c, pr_dd, pr_n)
     fi
  fi
}

/* No write after release: a put may land any time until the flush that
 * covers it completes, so pages released while a put of the writer is still
 * in flight (inD/inA) could be written after reuse. */
inline check_release(cr_dd) {
  if
  :: inD[E(cr_dd,cr_dd)] || inA[E(cr_dd,cr_dd)] ->
     printf("VIOLATION pages: D%d releases its pages with a put of P%d in flight\n", cr_dd, cr_dd); assert(0)
  :: else -> skip
  fi
}

/* ucp_ep_flush() completes: every put of P to D has landed. */
inline land(l_p) {
  if
  :: (inD[E(l_p,l_p)] || inA[E(l_p,l_p)]) && tnon[E(l_p,l_p)] != inc[2+l_p]+1 ->
     printf("VIOLATION pages: a put of P%d for an earlier incarnation lands after D%d opened the id again\n", l_p, l_p); assert(0)
  :: else -> skip
  fi;
  if
  :: pages[l_p] == RELEASED && (inD[E(l_p,l_p)] || inA[E(l_p,l_p)]) ->
     printf("VIOLATION pages: a put of P%d lands in D%d's released pages\n", l_p, l_p); assert(0)
  :: else -> skip
  fi;
  if
  :: inD[E(l_p,l_p)] -> landD[E(l_p,l_p)] = 1; inD[E(l_p,l_p)] = 0
  :: else -> skip
  fi;
  if
  :: inA[E(l_p,l_p)] -> landA[l_p] = 1; inA[E(l_p,l_p)] = 0
  :: else -> skip
  fi
}

inline d_update_pages(dup_dd) {
  if
  :: st[2+dup_dd] == FAILED && pages[dup_dd] == DRAINING &&
     (!dgranted[dup_dd] || sdone[E(dup_dd,dup_dd)] || sdrained[E(dup_dd,dup_dd)]) ->
     check_release(dup_dd); pages[dup_dd] = RELEASED
  :: else -> skip
  fi
}

inline d_fail(df_dd, df_c) {
  if
  :: TERM(2+df_dd) -> skip
  :: else ->
     rec[2+df_dd] = df_c; mark(2+df_dd, rec[2+df_dd]); bfail[2+df_dd] = st[2+df_dd]; st[2+df_dd] = FAILED;
     printf("MSC: D%d room FAILED in state %d, reason %d (stage %d kind %d origin rank %d)\n", df_dd, bfail[2+df_dd], df_c, (df_c-1)/16, ((df_c-1)%16)/4, (df_c-1)%4);
     if
     :: TALKS(0,df_dd) -> to_p(df_dd, 0, FAIL, rec[2+df_dd])
     :: else -> skip
     fi;
     if
     :: TALKS(1,df_dd) -> to_p(df_dd, 1, FAIL, rec[2+df_dd])
     :: else -> skip
     fi;
     pages[df_dd] = DRAINING; d_update_pages(df_dd)
  fi
}

inline d_verdict(dv_dd) {
  if
  :: TALKS(0,dv_dd) -> to_p(dv_dd, 0, VERDICT, rec[2+dv_dd])
  :: else -> skip
  fi;
  if
  :: TALKS(1,dv_dd) -> to_p(dv_dd, 1, VERDICT, rec[2+dv_dd])
  :: else -> skip
  fi
}

/* agree_send_verdict() for an agreed SUCCESS */
inline d_agreed(dag_dd) {
#ifndef NO_AGREED
  if
  :: TALKS(0,dag_dd) -> to_p(dag_dd, 0, AGREED, 0)
  :: else -> skip
  fi;
  if
  :: TALKS(1,dag_dd) -> to_p(dag_dd, 1, AGREED, 0)
  :: else -> skip
  fi
#else
  skip
#endif
}

inline d_succeed(ds_dd) {
  if
  :: !(landD[E(ds_dd,ds_dd)] && landA[ds_dd]) -> printf("VIOLATION validity: D%d SUCCESS without its data and aux\n", ds_dd); assert(0)
  :: else -> skip
  fi;
  st[2+ds_dd] = SUCC; check_release(ds_dd); pages[ds_dd] = RELEASED; printf("MSC: D%d room SUCCESS (pages released)\n", ds_dd);
  if
  :: TALKS(0,ds_dd) -> to_p(ds_dd, 0, RECEIVED, 0)
  :: else -> skip
  fi;
  if
  :: TALKS(1,ds_dd) -> to_p(ds_dd, 1, RECEIVED, 0)
  :: else -> skip
  fi
}

inline d_complete(dc_dd) {
  if
  :: landA[dc_dd] -> d_succeed(dc_dd)
  :: else -> nc = CODE(S_AUX, K_ERR, 2+dc_dd); d_fail(dc_dd, nc)
  fi
}

/* receiver_on_verdict(): a prefill rank says its instance cannot conclude
 * the room (or concluded it FAILED without the decode's word), with its
 * record: a room not agreed yet fails with it, or, SUCCESS here, takes the
 * record and counts FAILED in rounds (prefill_failed); an agreed one was
 * told to the prefill already */
inline d_on_verdict(dov_dd, dov_c) {
  if
  :: agreed[2+dov_dd] -> skip
  :: else ->
     if
     :: !TERM(2+dov_dd) -> d_fail(dov_dd, dov_c)
     :: st[2+dov_dd] == SUCC && !pfail[dov_dd] -> rec[2+dov_dd] = dov_c;
        printf("MSC: D%d SUCCESS here, but the prefill cannot conclude it: reason %d\n", dov_dd, dov_c)
     :: else -> skip
     fi;
     pfail[dov_dd] = 1
  fi
}

#define DCUR(dd,m,n) ((m) == FAIL0 || (n) == inc[2+(dd)]+1)
inline d_handle(dh_dd, dh_p, dh_m, dh_c, dh_n) {
  if
  :: !uopen[2+dh_dd] -> skip
  /* protocol_room_msg(): about an earlier incarnation (FAIL0 names none) */
  :: uopen[2+dh_dd] && dh_m != FAIL0 && dh_n != inc[2+dh_dd]+1 -> printf("MSC: D%d drops %e of an earlier incarnation\n", dh_dd, dh_m)
  :: uopen[2+dh_dd] && DCUR(dh_dd, dh_m, dh_n) && dh_m == FAIL0 && !(st[2+dh_dd] == BOOT && !accepted[E(dh_p,dh_dd)]) -> skip
  :: uopen[2+dh_dd] && DCUR(dh_dd, dh_m, dh_n) && (dh_m == FAIL || (dh_m == FAIL0 && st[2+dh_dd] == BOOT && !accepted[E(dh_p,dh_dd)])) -> d_fail(dh_dd, dh_c)
  :: uopen[2+dh_dd] && DCUR(dh_dd, dh_m, dh_n) && (dh_m == DRAINED || (dh_m == DONE && TERM(2+dh_dd))) -> sdrained[E(dh_p,dh_dd)] = 1; d_update_pages(dh_dd)
  :: uopen[2+dh_dd] && DCUR(dh_dd, dh_m, dh_n) && dh_m == VERDICT -> d_on_verdict(dh_dd, dh_c)
  :: uopen[2+dh_dd] && DCUR(dh_dd, dh_m, dh_n) && TERM(2+dh_dd) && (dh_m == ACCEPT || dh_m == START) -> skip
  :: uopen[2+dh_dd] && DCUR(dh_dd, dh_m, dh_n) && !TERM(2+dh_dd) && dh_m == ACCEPT ->
     if
     :: !accepted[E(dh_p,dh_dd)] ->
        accepted[E(dh_p,dh_dd)] = 1;
        if
        :: ALLACC(dh_dd) -> set_state(2+dh_dd, WAIT)
        :: else -> skip
        fi
     :: else -> skip
     fi
  :: uopen[2+dh_dd] && DCUR(dh_dd, dh_m, dh_n) && !TERM(2+dh_dd) && dh_m == START -> set_state(2+dh_dd, XFER)
  :: uopen[2+dh_dd] && DCUR(dh_dd, dh_m, dh_n) && !TERM(2+dh_dd) && dh_m == DONE ->
     if
     :: WRITES(dh_p,dh_dd) && !sdone[E(dh_p,dh_dd)] -> sdone[E(dh_p,dh_dd)] = 1; d_complete(dh_dd)
     :: else -> skip
     fi
  fi
}

inline fail_any(fa_r, fa_c) {
  if
  :: fa_r < 2 -> p_fail(fa_r, fa_c)
  :: else -> d_fail(fa_r-2, fa_c)
  fi
}

/* As built before the fix of 17(a) (and before AGREED), a decode rank that
 * concluded FAILED by breaking its instance may disagree with a prefill
 * that concluded SUCCESS on every RECEIVED: exempt there unless -DSTRICT. */
#if defined(STRICT)
#define EXEMPT 0
#elif defined(NO_AGREED)
#define EXEMPT 1
#else
#define EXEMPT ownround
#endif
/* What rank q concluded of rank r's incarnation: its current room's
 * conclusion, or, once q opened the id again, its previous one's. */
#define QPREV(q,r) (inc[q] != inc[r])
#define QAGST(q,r) (QPREV(q,r) -> hagst[q] : agst[q])
#define QREC(q,r) (QPREV(q,r) -> hrec[q] : rec[q])
#define QHOW(q,r) (QPREV(q,r) -> hhow[q] : how[q])
#define QLONE(q,r) (QPREV(q,r) -> hlone[q] : lone[q])
inline check_pair(cp_r) {
  for (q : 0 .. 3) {
    if
    :: q != cp_r && alive[q] && alive[cp_r] && agreed[cp_r] && !closed[q] && !closed[cp_r] &&
       ((inc[q] == inc[cp_r] && agreed[q]) || inc[q] == inc[cp_r] + 1) ->
       if
       :: EXEMPT && ((QHOW(q,cp_r) == H_BREAK && q >= 2) || (how[cp_r] == H_BREAK && cp_r >= 2)) -> skip
       :: else ->
          if
          :: QAGST(q,cp_r) != agst[cp_r] -> printf("VIOLATION agreement: rank %d concluded %d, rank %d concluded %d (incarnation %d)\n", cp_r, agst[cp_r], q, QAGST(q,cp_r), inc[cp_r]); assert(0)
          :: else -> skip
          fi;
#ifndef NOREASON
          if
          :: QAGST(q,cp_r) == FAILED && agst[cp_r] == FAILED && QREC(q,cp_r) != rec[cp_r] && !QLONE(q,cp_r) && !lone[cp_r] ->
             printf("VIOLATION reason: rank %d reports %d, rank %d reports %d\n", cp_r, rec[cp_r], q, QREC(q,cp_r)); assert(0)
          :: else -> skip
          fi
#endif
       fi
    :: else -> skip
    fi
  }
}

/* Decode rank dd's pages and aux landed, in incarnation k of the id. */
#define LANDED(dd,k) (inc[2+(dd)] == (k) -> (landD[E(dd,dd)] && landA[dd]) : (inc[2+(dd)] == (k) + 1 -> hland[dd] : 0))
inline conclude(c_r, c_s, c_h) {
#ifndef NOFINAL
  if
  :: agreed[c_r] && agst[c_r] != c_s -> printf("VIOLATION finality: rank %d concluded %d, then %d\n", c_r, agst[c_r], c_s); assert(0)
  :: else -> skip
  fi;
#endif
  agreed[c_r] = 1; agst[c_r] = c_s; how[c_r] = c_h;
  printf("MSC: rank %d CONCLUDES %d (how %d) reason %d\n", c_r, c_s, c_h, rec[c_r]);
  if
  :: c_s == FAILED && (rec[c_r] == 0 || !orig[rec[c_r]]) -> printf("VIOLATION integrity: rank %d concluded FAILED with reason %d\n", c_r, rec[c_r]); assert(0)
  :: else -> skip
  fi;
  if
  :: c_s == SUCC && !(LANDED(0, inc[c_r]) && LANDED(1, inc[c_r])) -> printf("VIOLATION validity: rank %d concluded SUCCESS without all data\n", c_r); assert(0)
  :: else -> skip
  fi;
  /* promptness (prompt=1): a rank never opening the room is the only
   * reason a room fails within rounds and KVX_TP_TIMEOUT: every rank that
   * concludes it FAILED reports the record of the rank that lacks it */
  if
  :: prompt && c_s == FAILED && noopen != 0 && maxf == 0 && maxt == 0 && maxc == 0 && maxs == 0 && eclose == 0 &&
     !(rec[c_r] == CODE(S_AGREE, K_ERR, ORIGIN(rec[c_r])) && (noopen & (1 << ORIGIN(rec[c_r])))) ->
     printf("VIOLATION reason: rank %d concluded FAILED with reason %d, not the record of the rank that never opened the room\n", c_r, rec[c_r]); assert(0)
  :: else -> skip
  fi;
  /* progress: without any fault (every rank opens and keeps its room, no
   * injected failure, early deadline or crash) every room succeeds: a
   * deadline only fires where the protocol got stuck */
  if
  :: c_s == FAILED && maxf == 0 && maxt == 0 && maxc == 0 && maxs == 0 && noopen == 0 && eclose == 0 ->
     printf("VIOLATION progress: rank %d concluded FAILED (reason %d) in a run without faults\n", c_r, rec[c_r]); assert(0)
  :: else -> skip
  fi;
  check_pair(c_r)
}

/* The sibling s of r is lost: peer_mark_lost -> peer_break_instance. */
inline break_instance(bi_r) {
  break_with(bi_r, CODE(RSTAGE(bi_r), K_LOST, bi_r))
}

/* peer_break_instance() on rank bi_r with the record bi_c: the loss of the
 * sibling, or the rounds out of step (peer_break_tp()). */
inline break_with(bi_r, bi_c) {
  if
  :: uopen[bi_r] && !agreed[bi_r] && bi_r >= 2 ->
     /* a decode rank concludes FAILED and tells the prefill (VERDICT) */
     nc = bi_c;
     if
     :: !TERM(bi_r) -> fail_any(bi_r, nc)
     :: st[bi_r] == SUCC -> rec[bi_r] = nc; orig[nc] = 1
     :: st[bi_r] == FAILED -> skip
     fi;
     conclude(bi_r, FAILED, H_BREAK);
     d_verdict(bi_r-2)
#ifndef NO_PREFILL_WORD
  :: uopen[bi_r] && !agreed[bi_r] && bi_r < 2 ->
     /* a prefill rank fails what it was still sending and waits for the
      * whole decode instance's word (sender_conclude_broken()) */
     nc = bi_c;
     if
     :: !TERM(bi_r) && !ALLDONE(bi_r) -> fail_any(bi_r, nc)
     :: st[bi_r] != FAILED && (TERM(bi_r) || ALLDONE(bi_r)) && !verdict[bi_r] -> rec[bi_r] = nc; orig[nc] = 1
     :: st[bi_r] == FAILED || (st[bi_r] != FAILED && (TERM(bi_r) || ALLDONE(bi_r)) && verdict[bi_r]) -> skip
     fi;
     pbroken[bi_r] = 1
#else
  /* before: a prefill rank concluded FAILED at once too */
  :: uopen[bi_r] && !agreed[bi_r] && bi_r < 2 ->
     nc = bi_c;
     if
     :: !TERM(bi_r) -> fail_any(bi_r, nc)
     :: st[bi_r] == SUCC -> rec[bi_r] = nc; orig[nc] = 1
     :: st[bi_r] == FAILED -> skip
     fi;
     conclude(bi_r, FAILED, H_BREAK)
#endif
  :: else -> skip
  fi
}

/* sender_conclude_broken(): the decode's word, or FAILED when none can come
 * (every decode rank it talks to lost) or after 10 peer timeouts (lone) */
inline p_conclude_broken(pcb_p, pcb_lone) {
  if
  :: dsucc[pcb_p] ->
     if
     :: !TERM(pcb_p) -> st[pcb_p] = SUCC
     :: else -> skip
     fi;
     conclude(pcb_p, SUCC, H_WORD)
  :: !dsucc[pcb_p] ->
     if
     :: !TERM(pcb_p) -> nc = rec[pcb_p]; p_fail(pcb_p, nc)
     :: else -> skip
     fi;
     lone[pcb_p] = pcb_lone;
     conclude(pcb_p, FAILED, H_WORD)
  fi
}

/* The application closes a concluded room and opens the id again
 * (kvx_room_close(), then kvx_room_recv_open() with new pages once its pages
 * are released or quarantined, or kvx_room_send_open() once UCX is done
 * with the source pages): what the rank concluded is kept for the checks. */
#define REOPEN_D(dd) (ninc > 1 && inc[2+(dd)] == 0 && uopen[2+(dd)] && agreed[2+(dd)] && !closed[2+(dd)] && \
  (pages[dd] == RELEASED || pages[dd] == QUAR))
#define REOPEN_P(p) (ninc > 1 && inc[p] == 0 && uopen[p] && agreed[p] && !closed[p] && \
  !flushing[E(p,p)] && !inD[E(p,p)] && !inA[E(p,p)])
inline keep_history(kh_r) {
  hagst[kh_r] = agst[kh_r]; hrec[kh_r] = rec[kh_r]; hhow[kh_r] = how[kh_r]; hlone[kh_r] = lone[kh_r];
  st[kh_r] = BOOT; bfail[kh_r] = 0; rec[kh_r] = 0; agreed[kh_r] = 0; agst[kh_r] = 0; how[kh_r] = 0;
  lone[kh_r] = 0; texp[kh_r] = 0; inc[kh_r] = 1
}

inline d_reopen(dr_dd) {
  printf("MSC: D%d app closes the room and opens the id again (new pages)\n", dr_dd);
  hland[dr_dd] = (landD[E(dr_dd,dr_dd)] && landA[dr_dd]);
  keep_history(2+dr_dd);
  dgranted[dr_dd] = 0; pages[dr_dd] = INUSE; landD[E(dr_dd,dr_dd)] = 0; landA[dr_dd] = 0; pfail[dr_dd] = 0;
  for (q : 0 .. 1) { accepted[E(q,dr_dd)] = 0; sdone[E(q,dr_dd)] = 0; sdrained[E(q,dr_dd)] = 0 }
  q = 0
}

/* sender_bury(): the closed room's nonces are dead to this rank */
inline p_reopen(pr_p) {
  printf("MSC: P%d app closes the room and opens the id again\n", pr_p);
  keep_history(pr_p);
  chunk[pr_p] = 0; started[pr_p] = 0; verdict[pr_p] = 0; dsucc[pr_p] = 0; longwait[pr_p] = 0; pbroken[pr_p] = 0;
  for (q : 0 .. 1) {
    if
    :: tnon[E(pr_p,q)] != 0 -> pdead[E(pr_p,q)] = tnon[E(pr_p,q)]
    :: else -> skip
    fi;
    granted[E(pr_p,q)] = 0; nk[E(pr_p,q)] = 0; tnon[E(pr_p,q)] = 0; posted[E(pr_p,q)] = 0; auxp[E(pr_p,q)] = 0;
    flushing[E(pr_p,q)] = 0; done_sent[E(pr_p,q)] = 0; received[E(pr_p,q)] = 0; drained_sent[E(pr_p,q)] = 0
  }
  q = 0
}

/* ---- agree.c: one agreement round of instance i (TP ranks r = 2i, s = 2i+1) ----
 * A round is two steps, each taken for both TP ranks at once (the collective
 * completes only when both have entered it; the model samples both at the
 * same instant, see "not modelled" in README):
 *   A  agree_sample(): each rank's contribution (sender_may_conclude() on a
 *      prefill), whether the room is fresh (agree_collect_fresh()), and the
 *      MIN reduction (MPI_Iallreduce) -- the result is known from here;
 *   BC agree_post_bc() samples the failure records *later* (other events run
 *      between A and BC: the window where a prefill rank fails on its own after
 *      A -- the race of c804017), agree_root_op() reduces them, agree_apply()
 *      -> agree_conclude() concludes slots whose minimum is final (a FAILED
 *      one fails a room still in flight with the root cause; the decode sends
 *      VERDICT, agree_send_verdict()), agree_assign() slots fresh rooms.
 * A round is entered only when it can change something (a rank's room is
 * fresh or its contribution final) and its samples differ from the last
 * round's: a round of non-final minima with the same samples changes nothing
 * (stuttering), so leaving it out keeps the state space small. No round is
 * entered once a sibling is lost (ctx->tp_broken); one in flight is abandoned. */
#define GUARD_A(i) (ph[i] == 0 && !skew[i] && alive[2*(i)] && alive[2*(i)+1] && \
  !LOST(2*(i),2*(i)+1) && !LOST(2*(i)+1,2*(i)) && \
  ((!agreed[2*(i)] && READY(2*(i))) || (!agreed[2*(i)+1] && READY(2*(i)+1))) && \
  (lastS[2*(i)] == NOS || prevEff[i] || SIG(2*(i)) != lastS[2*(i)] || SIG(2*(i)+1) != lastS[2*(i)+1]))
#define GUARD_BC(i) (ph[i] == 1 && !skew[i] && alive[2*(i)] && alive[2*(i)+1] && \
  !LOST(2*(i),2*(i)+1) && !LOST(2*(i)+1,2*(i)))
#define GUARD_X(i) (ph[i] == 1 && (LOST(2*(i),2*(i)+1) || LOST(2*(i)+1,2*(i))))

inline agree_a(aa_r) {
  cA[aa_r] = CONTRIB(aa_r); wA[aa_r] = HEARD(aa_r); hA[aa_r] = FRESH(aa_r); sA[aa_r] = SIG(aa_r); lw[aa_r] = LWONLY(aa_r);
  eA[aa_r] = texp[aa_r];
  printf("MSC: rank %d agreement A: contributes %d (fresh %d, slot %d)\n", aa_r, cA[aa_r], hA[aa_r], slot[aa_r])
}

/* agree_post_bc(): this rank's record of a slot whose minimum is FAILED. */
inline agree_b(ab_r, ab_s) {
  bH[ab_r] = (slot[ab_r] && EFFA(ab_r,ab_s) == FAILED && HASREC(ab_r));
  bR[ab_r] = rec[ab_r];
  bV[ab_r] = (ab_r < 2 && verdict[ab_r]); /* a->recs[k].verdict */
  if
  :: bH[ab_r] -> printf("MSC: rank %d agreement B: record %d (verdict %d)\n", ab_r, bR[ab_r], bV[ab_r])
  :: else -> skip
  fi
}

/* agree_root_op() over the two records: the verdict first (c804017), then
 * failure_compare() (earliest stage, then lowest origin rank). Equal keys
 * keep either record (the operation keeps inout on a tie; which record is
 * inout on which rank is MPI's choice): both are explored, per rank. */
inline agree_root(ar_r, ar_s) {
  if
#ifndef NO_VERDICT_PRECEDENCE
  :: bH[ar_r] && bH[ar_s] && bV[ar_r] != bV[ar_s] -> root = (bV[ar_r] -> bR[ar_r] : bR[ar_s]); rootv = 1
  :: bH[ar_r] && bH[ar_s] && bV[ar_r] == bV[ar_s] && KEY(bR[ar_r]) < KEY(bR[ar_s]) -> root = bR[ar_r]; rootv = bV[ar_r]
  :: bH[ar_r] && bH[ar_s] && bV[ar_r] == bV[ar_s] && KEY(bR[ar_s]) < KEY(bR[ar_r]) -> root = bR[ar_s]; rootv = bV[ar_s]
  :: bH[ar_r] && bH[ar_s] && bV[ar_r] == bV[ar_s] && KEY(bR[ar_r]) == KEY(bR[ar_s]) -> root = bR[ar_r]; rootv = bV[ar_r]
  :: bH[ar_r] && bH[ar_s] && bV[ar_r] == bV[ar_s] && KEY(bR[ar_r]) == KEY(bR[ar_s]) -> root = bR[ar_s]; rootv = bV[ar_s]
#else
  /* the reduction before c804017: a verdict is a record like any other */
  :: bH[ar_r] && bH[ar_s] && KEY(bR[ar_r]) < KEY(bR[ar_s]) -> root = bR[ar_r]; rootv = bV[ar_r]
  :: bH[ar_r] && bH[ar_s] && KEY(bR[ar_s]) < KEY(bR[ar_r]) -> root = bR[ar_s]; rootv = bV[ar_s]
  :: bH[ar_r] && bH[ar_s] && KEY(bR[ar_r]) == KEY(bR[ar_s]) -> root = bR[ar_r]; rootv = bV[ar_r]
  :: bH[ar_r] && bH[ar_s] && KEY(bR[ar_r]) == KEY(bR[ar_s]) -> root = bR[ar_s]; rootv = bV[ar_s]
#endif
  :: bH[ar_r] && !bH[ar_s] -> root = bR[ar_r]; rootv = bV[ar_r]
  :: !bH[ar_r] && bH[ar_s] -> root = bR[ar_s]; rootv = bV[ar_s]
  :: !bH[ar_r] && !bH[ar_s] -> root = 0; rootv = 0
  fi
}

/* agree_conclude_unheld() on rank au_r: its sibling au_s never opened the
 * room, or closed it before the instance agreed. The record is made as if
 * by the rank that lacks it. A decode rank concludes FAILED and sends its
 * VERDICT. A prefill rank (the fix of 17(a), sender_conclude_unheld())
 * fails the room if it is still in flight (room_fail(): FAIL), keeps a
 * verdict it holds (else the record replaces its own), tells the decode
 * ranks its record as a VERDICT unless it holds the decode's verdict or
 * AGREED (sender_send_verdict(): a decode rank that holds the room SUCCESS
 * drops a FAIL) and then, like a broken instance's room, concludes with
 * the decode's word (broken_at, sender_conclude_broken()); before c693567
 * (ownround) it concluded FAILED at once. */
inline agree_unheld(au_r, au_s) {
  nc = CODE(S_AGREE, K_ERR, au_s); orig[nc] = 1;
  printf("MSC: rank %d agreement C: rank %d never opened the room or closed it early\n", au_r, au_s);
  if
  :: !TERM(au_r) -> fail_any(au_r, nc)
  :: else -> skip
  fi;
  if
  :: au_r < 2 && !ownround ->
     if
     :: !verdict[au_r] -> rec[au_r] = nc
     :: else -> skip
     fi;
     if
     :: !verdict[au_r] && !dsucc[au_r] -> p_send_verdict(au_r)
     :: else -> skip
     fi;
     pbroken[au_r] = 1
  :: else ->
     rec[au_r] = nc;
     conclude(au_r, FAILED, H_UNHELD);
     if
     :: au_r >= 2 -> d_verdict(au_r-2)
     :: else -> skip
     fi
  fi
}

/* agree_apply() -> agree_conclude(), agree_assign() on rank ac_r. */
inline agree_c(ac_r, ac_s) {
  if
  :: slot[ac_r] && EFFA(ac_r,ac_s) == SUCC -> slot[ac_r] = 0;
     /* agree_conclude(): a prefill rank still waiting for its receipt
      * takes the decode's SUCCESS */
     if
     :: ac_r < 2 && !TERM(ac_r) -> st[ac_r] = SUCC
     :: else -> skip
     fi;
     conclude(ac_r, SUCC, H_ROUND);
     if
     :: ac_r >= 2 -> d_agreed(ac_r-2)
     :: else -> skip
     fi
  :: slot[ac_r] && EFFA(ac_r,ac_s) == FAILED ->
     agree_root(ac_r, ac_s);
     slot[ac_r] = 0;
     if
     :: root != 0 ->
        if
        :: !TERM(ac_r) -> fail_any(ac_r, root)
        :: else -> skip
        fi;
        rec[ac_r] = root
     :: else -> skip
     fi;
     lone[ac_r] = lw[ac_r] || lw[ac_s];
     conclude(ac_r, FAILED, H_ROUND);
     if
     :: ac_r >= 2 -> d_verdict(ac_r-2)
     /* agree_conclude(): a prefill slot agreed FAILED without the decode's
      * verdict (alone after 10 peer timeouts, or no decode rank left)
      * tells the decode ranks its record (7e7c971) */
     :: ac_r < 2 && root != 0 && !rootv -> p_send_verdict(ac_r)
     :: else -> skip
     fi;
     rootv = 0
  :: slot[ac_r] && EFFA(ac_r,ac_s) != SUCC && EFFA(ac_r,ac_s) != FAILED -> skip
  :: !slot[ac_r] && hA[ac_r] && hA[ac_s] -> slot[ac_r] = 1; printf("MSC: rank %d agreement C: room gets a slot\n", ac_r)
  /* agree_assign() -> agree_conclude_unheld(): held here for KVX_TP_TIMEOUT,
   * not by the sibling */
  :: !slot[ac_r] && hA[ac_r] && !hA[ac_s] && eA[ac_r] && !PBR(ac_r) -> agree_unheld(ac_r, ac_s)
  :: !slot[ac_r] && !(hA[ac_r] && hA[ac_s]) && !(hA[ac_r] && !hA[ac_s] && eA[ac_r] && !PBR(ac_r)) -> skip
  fi
}

/* The round's samples are dead once it is over: cleared, so that states
 * differing only in them are one state (no behaviour depends on them). */
inline agree_clear(acl_r) {
  cA[acl_r] = 0; wA[acl_r] = 0; hA[acl_r] = 0; sA[acl_r] = 0; lw[acl_r] = 0;
  bR[acl_r] = 0; bH[acl_r] = 0; bV[acl_r] = 0; eA[acl_r] = 0
}

/* A crashed rank's own variables, and its instance's round state, are never
 * read again (every use is by the rank itself, gated by alive[], or by a
 * round, which needs both TP ranks alive): reset, so that crashes at points
 * that differ only in them are one state. What the survivors can still see
 * is kept: its messages in flight, its puts in flight or landed, orig[]. */
inline forget_rank(fr_r, fr_s, fr_i) {
  st[fr_r] = BOOT; bfail[fr_r] = 0; rec[fr_r] = 0; uopen[fr_r] = 0;
  agreed[fr_r] = 0; agst[fr_r] = 0; how[fr_r] = 0; lone[fr_r] = 0; closed[fr_r] = 0; texp[fr_r] = 0; texp[fr_s] = 0; tpb[fr_r] = 0;
  ph[fr_i] = 0; prevEff[fr_i] = 0;
  slot[fr_r] = 0; lastS[fr_r] = NOS; agree_clear(fr_r);
  slot[fr_s] = 0; lastS[fr_s] = NOS; agree_clear(fr_s)
}

/* The application's kvx_agree_start() / kvx_agree_test() loop of instance i
 * (0: prefill ranks 0,1; 1: decode ranks 2,3). */
proctype Agree(byte i) {
  byte nc, nn, root, q, r = 2*i, s = 2*i+1;
  bit rootv;
end:
  do
  :: atomic { GUARD_A(i) -> agree_a(r); agree_a(s); ph[i] = 1 }
  :: atomic { GUARD_BC(i) -> agree_b(r, s); agree_b(s, r); agree_c(r, s); agree_c(s, r);
       prevEff[i] = (sA[r] != lastS[r] || sA[s] != lastS[s]);
       lastS[r] = sA[r]; lastS[s] = sA[s]; ph[i] = 0; agree_clear(r); agree_clear(s) }
  /* kvx_agree_test(): a lost sibling never completes the collective */
  :: atomic { GUARD_X(i) -> ph[i] = 0; agree_clear(r); agree_clear(s) }
  /* one TP rank's application starts a round more than its sibling's: the
   * round in flight, and every later one, never completes */
  :: atomic { nskew < maxs && (sinst & (1 << i)) && !skew[i] && alive[r] && alive[s] ->
       nskew++; skew[i] = 1; ph[i] = 0; agree_clear(r); agree_clear(s); printf("MSC: instance %d: rounds out of step\n", i) }
  od
}

proctype Prefill(byte p) {
  mtype m; byte c, dd, n, nn, nc, root, q;
  byte me = p, sib = 1 - p;
end:
  do
  /* application: kvx_room_send_open */
  :: atomic { (!uopen[p] && !(noopen & (1 << me))) || REOPEN_P(p) ->
       if
       :: uopen[p] -> p_reopen(p)
       :: else -> skip
       fi;
       uopen[p] = 1; printf("MSC: P%d app opens the room (kvx_room_send_open)\n", p);
       do
       :: early[p]?m,c,dd,n -> p_recv(p, m, c, dd, n)
       :: empty(early[p]) -> break
       od;
       if
       :: TALKS(p,0) && LOST(p,2) -> nc = CODE(S_BOOT, K_LOST, p); p_fail(p, nc)
       :: else -> skip
       fi;
       if
       :: TALKS(p,1) && LOST(p,3) -> nc = CODE(S_BOOT, K_LOST, p); p_fail(p, nc)
       :: else -> skip
       fi;
#ifndef NO_OPEN_BREAK
       /* room_api_opened() -> peer_break_if_broken(): a room opened after a
        * TP sibling was lost concludes at once (no round will run for it) */
       if
       :: LOST(me,sib) -> break_instance(me)
       :: !LOST(me,sib) && tpb[me] -> break_with(me, CODE(S_AGREE, K_TIMEOUT, 2*(me/2)))
       :: else -> skip
       fi;
#endif
#ifdef CHUNK_AT_OPEN
       /* bound: the application hands its one chunk right after opening */
       if
       :: !TERM(p) -> chunk[p] = 1; printf("MSC: P%d app hands the chunk (kvx_room_send_chunk)\n", p); p_maybe_start(p); p_pump_all(p)
       :: else -> skip
       fi;
#endif
       skip }
  /* application: kvx_room_send_chunk, one chunk with the aux payload */
  :: atomic { !CHUNK_OPEN && uopen[p] && !chunk[p] && !TERM(p) -> chunk[p] = 1; printf("MSC: P%d app hands the chunk (kvx_room_send_chunk)\n", p); p_maybe_start(p); p_pump_all(p) }
  /* application: kvx_room_abort */
  :: atomic { (nf < maxf && (franks & (1 << me))) && uopen[p] && !TERM(p) && !DELIVERED(p) -> nf++; printf("MSC: P%d app aborts\n", p); nc = CODE(S_ABORT, K_ABORT, p); p_fail(p, nc) }
  /* messages from decode rank 0 and 1 */
  :: atomic { dp[E(p,0)]?m,c,n -> dd = 0; printf("MSC: P%d receives %e(%d) from D0 (incarnation %d)\n", p, m, c, n);
       if
       :: LOST(p,2) -> LOST(p,2) = 0
       :: else -> skip
       fi;
       p_recv(p, m, c, dd, n) }
  :: atomic { dp[E(p,1)]?m,c,n -> dd = 1; printf("MSC: P%d receives %e(%d) from D1 (incarnation %d)\n", p, m, c, n);
       if
       :: LOST(p,3) -> LOST(p,3) = 0
       :: else -> skip
       fi;
       p_recv(p, m, c, dd, n) }
  /* a crashed decode rank's messages that never arrive */
  :: atomic { !alive[2] && nempty(dp[E(p,0)]) -> do :: dp[E(p,0)]?_,_,_ :: empty(dp[E(p,0)]) -> break od }
  :: atomic { !alive[3] && nempty(dp[E(p,1)]) -> do :: dp[E(p,1)]?_,_,_ :: empty(dp[E(p,1)]) -> break od }
  /* data plane: flush completion, put errors, puts to a dead rank */
  :: atomic { flushing[E(p,p)] && alive[2+p] -> land(p);
       flushing[E(p,p)] = 0; printf("MSC: P%d flush to D%d complete\n", p, p);
       if
       :: TERM(p) -> p_send_drained(p, p)
       :: else -> p_target_done(p, p)
       fi }
  :: atomic { flushing[E(p,p)] && (nf < maxf && (franks & (1 << me))) -> nf++;
       flushing[E(p,p)] = 0; printf("MSC: P%d flush fails\n", p); nc = CODE(S_COMPL, K_ERR, p); p_fail(p, nc) }
  :: atomic { inD[E(p,p)] && (nf < maxf && (franks & (1 << me))) -> nf++; inD[E(p,p)] = 0; printf("MSC: P%d page put fails\n", p); nc = CODE(S_POST, K_ERR, p); p_fail(p, nc) }
  /* a flush to a dead rank fails (ucp_worker_flush error) */
  :: atomic { flushing[E(p,p)] && !alive[2+p] -> inD[E(p,p)] = 0; inA[E(p,p)] = 0;
       flushing[E(p,p)] = 0; nc = CODE(S_COMPL, K_ERR, p); p_fail(p, nc) }
  /* deadlines */
  :: atomic { timeout && P_DEADLINE(p) -> printf("MSC: P%d deadline\n", p); nc = CODE(RSTAGE(p), K_TIMEOUT, p); p_fail(p, nc) }
  :: atomic { (nt < maxt && (tranks & (1 << me))) && P_DEADLINE(p) -> nt++; printf("MSC: P%d deadline\n", p); nc = CODE(RSTAGE(p), K_TIMEOUT, p); p_fail(p, nc) }
  :: atomic { timeout && P_SHADOW_DEADLINE(p) -> printf("MSC: P%d unopened room (early messages) expires\n", p); nc = CODE(S_BOOT, K_TIMEOUT, p); p_fail(p, nc) }
  :: atomic { (nt < maxt && (tranks & (1 << me))) && P_SHADOW_DEADLINE(p) -> nt++; printf("MSC: P%d unopened room (early messages) expires\n", p); nc = CODE(S_BOOT, K_TIMEOUT, p); p_fail(p, nc) }
  :: atomic { timeout && P_LONGWAIT(p) -> longwait[p] = 1; printf("MSC: P%d: 10 peer timeouts without a verdict\n", p) }
  :: atomic { (nt < maxt && (tranks & (1 << me))) && P_LONGWAIT(p) && DP_QUIET -> nt++; longwait[p] = 1; printf("MSC: P%d: 10 peer timeouts without a verdict\n", p) }
  /* loss detection */
  :: atomic { !alive[sib] && !LOST(p,sib) -> LOST(p,sib) = 1; printf("MSC: P%d detects sibling P%d lost\n", p, sib); break_instance(p) }
  :: atomic { skew[0] && !tpb[me] -> tpb[me] = 1; nn = CODE(S_AGREE, K_TIMEOUT, 0); orig[nn] = 1;
       printf("MSC: P%d: rounds out of step, breaks the instance\n", p); break_with(me, nn) }
  :: atomic { TALKS(p,0) && !alive[2] && !LOST(p,2) -> LOST(p,2) = 1;
       if
       :: uopen[p] && !TERM(p) -> nc = CODE(RSTAGE(p), K_LOST, p); p_fail(p, nc)
       :: else -> skip
       fi }
  :: atomic { TALKS(p,1) && !alive[3] && !LOST(p,3) -> LOST(p,3) = 1;
       if
       :: uopen[p] && !TERM(p) -> nc = CODE(RSTAGE(p), K_LOST, p); p_fail(p, nc)
       :: else -> skip
       fi }
  /* a broken instance's room: the decode's word (sender_conclude_broken) */
  :: atomic { pbroken[p] && uopen[p] && !agreed[p] && (dsucc[p] || verdict[p] || CUTOFF(p)) ->
       printf("MSC: P%d concludes with the decode's word (broken instance)\n", p); p_conclude_broken(p, 0) }
  :: atomic { timeout && P_WORDWAIT(p) -> printf("MSC: P%d: 10 peer timeouts without the decode's word\n", p); p_conclude_broken(p, 1) }
  :: atomic { timeout && TEXP(me) -> texp[me] = 1; printf("MSC: P%d held the room for KVX_TP_TIMEOUT, its sibling does not\n", p) }
  /* application: kvx_room_close once SUCCESS here, before the instance agreed */
  :: atomic { (eclose & (1 << me)) && uopen[p] && st[p] == SUCC && !agreed[p] && !slot[p] ->
       closed[p] = 1; printf("MSC: P%d app closes the room before its instance agreed\n", p); goto closedp }
  /* crash */
  :: atomic { (ncrash < maxc && (cranks & (1 << me))) -> ncrash++; alive[p] = 0; printf("MSC: P%d CRASHES\n", p);
       forget_rank(me, sib, 0);
       chunk[p] = 0; started[p] = 0; verdict[p] = 0; dsucc[p] = 0; longwait[p] = 0; pbroken[p] = 0;
       for (q : 0 .. 1) {
         granted[E(p,q)] = 0; nk[E(p,q)] = 0; posted[E(p,q)] = 0; auxp[E(p,q)] = 0; flushing[E(p,q)] = 0;
         done_sent[E(p,q)] = 0; received[E(p,q)] = 0; drained_sent[E(p,q)] = 0;
         do :: dp[E(p,q)]?_,_,_ :: empty(dp[E(p,q)]) -> break od
       }
       q = 0;
       do :: early[p]?_,_,_,_ :: empty(early[p]) -> break od;
       goto dead }
  od;
  /* closed: late messages are dropped */
closedp:
end_closedp:
  do
  :: atomic { dp[E(p,0)]?_,_,_ }
  :: atomic { dp[E(p,1)]?_,_,_ }
  od;
dead:
  skip
}

proctype Decode(byte dd) {
  mtype m; byte c, p, n, nn, nc, root, q;
  byte me = 2 + dd, sib = 3 - dd;
end:
  do
  :: atomic { (!uopen[me] && !(noopen & (1 << me))) || REOPEN_D(dd) ->
       if
       :: uopen[me] -> d_reopen(dd)
       :: else -> skip
       fi;
       uopen[me] = 1; printf("MSC: D%d app opens the room (kvx_room_recv_open)\n", dd);
       if
       :: dgranted[dd] = 1;
          if
          :: TALKS(0,dd) -> to_p(dd, 0, PREALLOC, 0)
          :: else -> skip
          fi;
          if
          :: TALKS(1,dd) -> to_p(dd, 1, PREALLOC, 0)
          :: else -> skip
          fi
       :: (nf < maxf && (franks & (1 << me))) -> nf++; nc = CODE(S_PREALLOC, K_ERR, me); d_fail(dd, nc)
       fi;
       if
       :: TALKS(0,dd) && LOST(me,0) -> nc = CODE(S_BOOT, K_LOST, me); d_fail(dd, nc)
       :: else -> skip
       fi;
       if
       :: TALKS(1,dd) && LOST(me,1) -> nc = CODE(S_BOOT, K_LOST, me); d_fail(dd, nc)
       :: else -> skip
       fi;
#ifndef NO_OPEN_BREAK
       /* room_api_opened() -> peer_break_if_broken(): a room opened after a
        * TP sibling was lost concludes at once (no round will run for it) */
       if
       :: LOST(me,sib) -> break_instance(me)
       :: !LOST(me,sib) && tpb[me] -> break_with(me, CODE(S_AGREE, K_TIMEOUT, 2*(me/2)))
       :: else -> skip
       fi;
#endif
       skip }
  :: atomic { (nf < maxf && (franks & (1 << me))) && uopen[me] && !TERM(me) -> nf++; printf("MSC: D%d app aborts\n", dd); nc = CODE(S_ABORT, K_ABORT, me); d_fail(dd, nc) }
  :: atomic { pd[E(0,dd)]?m,c,n -> p = 0; printf("MSC: D%d receives %e(%d) from P0 (incarnation %d)\n", dd, m, c, n);
       if
       :: LOST(me,p) -> LOST(me,p) = 0
       :: else -> skip
       fi;
       d_handle(dd, p, m, c, n) }
  :: atomic { pd[E(1,dd)]?m,c,n -> p = 1; printf("MSC: D%d receives %e(%d) from P1 (incarnation %d)\n", dd, m, c, n);
       if
       :: LOST(me,p) -> LOST(me,p) = 0
       :: else -> skip
       fi;
       d_handle(dd, p, m, c, n) }
  :: atomic { !alive[0] && nempty(pd[E(0,dd)]) -> do :: pd[E(0,dd)]?_,_,_ :: empty(pd[E(0,dd)]) -> break od }
  :: atomic { !alive[1] && nempty(pd[E(1,dd)]) -> do :: pd[E(1,dd)]?_,_,_ :: empty(pd[E(1,dd)]) -> break od }
  /* deadlines */
  :: atomic { timeout && D_DEADLINE(me) -> printf("MSC: D%d deadline\n", dd); nc = CODE(RSTAGE(me), K_TIMEOUT, me); d_fail(dd, nc) }
  :: atomic { (nt < maxt && (tranks & (1 << me))) && D_DEADLINE(me) -> nt++; printf("MSC: D%d deadline\n", dd); nc = CODE(RSTAGE(me), K_TIMEOUT, me); d_fail(dd, nc) }
  :: atomic { timeout && D_DRAIN(dd) -> pages[dd] = QUAR; printf("MSC: D%d pages QUARANTINED (drain timeout)\n", dd) }
  :: atomic { timeout && TEXP(me) -> texp[me] = 1; printf("MSC: D%d held the room for KVX_TP_TIMEOUT, its sibling does not\n", dd) }
  /* application: kvx_room_close once SUCCESS here (pages released), before the instance agreed */
  :: atomic { (eclose & (1 << me)) && uopen[me] && st[me] == SUCC && !agreed[me] && !slot[me] ->
       closed[me] = 1; printf("MSC: D%d app closes the room before its instance agreed\n", dd); goto closedd }
  /* loss detection */
  :: atomic { !alive[sib] && !LOST(me,sib) -> LOST(me,sib) = 1; printf("MSC: D%d detects sibling D%d lost\n", dd, sib-2); break_instance(me) }
  :: atomic { skew[1] && !tpb[me] -> tpb[me] = 1; nn = CODE(S_AGREE, K_TIMEOUT, 2); orig[nn] = 1;
       printf("MSC: D%d: rounds out of step, breaks the instance\n", dd); break_with(me, nn) }
  :: atomic { TALKS(0,dd) && !alive[0] && !LOST(me,0) -> LOST(me,0) = 1;
       if
       :: uopen[me] && !TERM(me) -> nc = CODE(RSTAGE(me), K_LOST, me); d_fail(dd, nc)
       :: else -> skip
       fi }
  :: atomic { TALKS(1,dd) && !alive[1] && !LOST(me,1) -> LOST(me,1) = 1;
       if
       :: uopen[me] && !TERM(me) -> nc = CODE(RSTAGE(me), K_LOST, me); d_fail(dd, nc)
       :: else -> skip
       fi }
  :: atomic { (ncrash < maxc && (cranks & (1 << me))) -> ncrash++; alive[me] = 0; printf("MSC: D%d CRASHES\n", dd);
       forget_rank(me, sib, 1);
       dgranted[dd] = 0; pages[dd] = INUSE; pfail[dd] = 0;
       for (q : 0 .. 1) {
         accepted[E(q,dd)] = 0; sdone[E(q,dd)] = 0; sdrained[E(q,dd)] = 0;
         do :: pd[E(q,dd)]?_,_,_ :: empty(pd[E(q,dd)]) -> break od
       }
       q = 0;
       goto dead }
  od;
  /* closed: late messages are dropped */
closedd:
end_closedd:
  do
  :: atomic { pd[E(0,dd)]?_,_,_ }
  :: atomic { pd[E(1,dd)]?_,_,_ }
  od;
dead:
  skip
}

init {
  byte i;
  atomic {
    maxf = MAXF; maxt = MAXT; maxc = MAXC; franks = FRANKS; tranks = TRANKS; cranks = CRANKS;
    noopen = NOOPEN; eclose = ECLOSE; ninc = NINC; ownround = OWNROUND; nonext = NONEXT; nopverdict = NOPVERDICT; prompt = PROMPT; maxs = MAXS; sinst = SINST;
    c_code {
      const char *e;
      if ((e = getenv("SPIN_MAXF")) != NULL) now.maxf = atoi(e);
      if ((e = getenv("SPIN_MAXT")) != NULL) now.maxt = atoi(e);
      if ((e = getenv("SPIN_MAXC")) != NULL) now.maxc = atoi(e);
      if ((e = getenv("SPIN_FRANKS")) != NULL) now.franks = atoi(e);
      if ((e = getenv("SPIN_TRANKS")) != NULL) now.tranks = atoi(e);
      if ((e = getenv("SPIN_CRANKS")) != NULL) now.cranks = atoi(e);
      if ((e = getenv("SPIN_NOOPEN")) != NULL) now.noopen = atoi(e);
      if ((e = getenv("SPIN_ECLOSE")) != NULL) now.eclose = atoi(e);
      if ((e = getenv("SPIN_NINC")) != NULL) now.ninc = atoi(e);
      if ((e = getenv("SPIN_OWNROUND")) != NULL) now.ownround = atoi(e);
      if ((e = getenv("SPIN_NONEXT")) != NULL) now.nonext = atoi(e);
      if ((e = getenv("SPIN_NOPVERDICT")) != NULL) now.nopverdict = atoi(e);
      if ((e = getenv("SPIN_PROMPT")) != NULL) now.prompt = atoi(e);
      if ((e = getenv("SPIN_MAXS")) != NULL) now.maxs = atoi(e);
      if ((e = getenv("SPIN_SINST")) != NULL) now.sinst = atoi(e);
    };
    printf("MSC: scenario maxf %d franks %d maxt %d tranks %d maxc %d cranks %d noopen %d eclose %d ninc %d ownround %d nonext %d nopverdict %d prompt %d maxs %d sinst %d\n", maxf, franks, maxt, tranks, maxc, cranks, noopen, eclose, ninc, ownround, nonext, nopverdict, prompt, maxs, sinst);
    for (i : 0 .. 3) { alive[i] = 1; st[i] = BOOT; lastS[i] = NOS }
    run Prefill(0); run Prefill(1); run Decode(0); run Decode(1); run Agree(0); run Agree(1)
  }
  (timeout && !ANY_DEADLINE) ->
  for (i : 0 .. 3) {
    if
    :: alive[i] && !(noopen & (1 << i)) && !closed[i] && !agreed[i] -> printf("VIOLATION termination: rank %d never concludes\n", i); assert(0)
    :: else -> skip
    fi
  }
  for (i : 0 .. 1) {
    if
    :: alive[2+i] && !(noopen & (1 << (2+i))) && (pages[i] == DRAINING || pages[i] == INUSE) -> printf("VIOLATION pages: D%d's pages never settle\n", i); assert(0)
    :: else -> skip
    fi
  }
}
