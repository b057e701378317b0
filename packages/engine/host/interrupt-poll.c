/*
 * The host's turn during a statement (see interrupt-poll.h): alarms that
 * came due and cancels the host asks for become the signals PostgreSQL
 * handles, SIGALRM (timeout.c: statement_timeout, lock_timeout, ...) and
 * SIGINT (a cancel request), raised where the backend checks for them.
 *
 * Emscripten's setitimer() arms a JavaScript timer, whose callback runs
 * only when the engine has returned to the event loop; so setitimer is
 * wrapped to note the deadline, and the poll raises SIGALRM itself once it
 * has passed. poll() is wrapped too: a latch wait (pg_sleep, a lock wait)
 * loops on poll(), which never blocks here, without reading
 * InterruptPending; each turn of it is a turn of the host's, and when
 * nothing is ready it sleeps a slice of its timeout on the host's clock
 * instead of spinning (where the host can block: Atomics.wait, which a
 * browser's main thread refuses, and then it spins as before).
 */
#include <emscripten.h>
#include <poll.h>
#include <signal.h>
#include <sys/time.h>

/* Reads of InterruptPending between two calls of the host. */
#define POLL_EVERY 512

int			pgwasm_poll_countdown = POLL_EVERY;

/* When the real-time interval timer runs out (emscripten_get_now() ms); 0: not armed. */
static double alarm_at = 0;

extern int	__real_setitimer(int which, const struct itimerval *new_value, struct itimerval *old_value);
extern int	__real_poll(struct pollfd *fds, nfds_t nfds, int timeout);
extern int	__wrap_setitimer(int which, const struct itimerval *new_value, struct itimerval *old_value);
extern int	__wrap_poll(struct pollfd *fds, nfds_t nfds, int timeout);
extern void pgwasm_poll_host(void);

/* Whether the host wants the running statement canceled (its pgwasmCancelRequested, if it set one). */
EM_JS(int, pgwasm_host_wants_cancel, (void), {
	return Module['pgwasmCancelRequested'] && Module['pgwasmCancelRequested']() ? 1 : 0;
});

/* The longest a poll() with nothing ready sleeps before the host's next turn, in ms. */
#define SLEEP_SLICE_MS 5

/* Sleeps up to ms on the host's clock (the module's pgwasmSleep, else Atomics.wait where allowed). */
EM_JS(void, pgwasm_host_sleep, (int ms), {
	if (Module['pgwasmSleep']) {
		Module['pgwasmSleep'](ms);
		return;
	}
	try {
		if (!Module['pgwasmSleepCell']) Module['pgwasmSleepCell'] = new Int32Array(new SharedArrayBuffer(4));
		Atomics.wait(Module['pgwasmSleepCell'], 0, 0, ms);
	} catch (e) {
		/* No SharedArrayBuffer, or a thread that may not block: the wait spins. */
	}
});

static void
take_turn(void)
{
	if (alarm_at != 0 && emscripten_get_now() >= alarm_at)
	{
		struct itimerval off = {{0, 0}, {0, 0}};

		/* The JavaScript timer would raise it a second time, later. */
		alarm_at = 0;
		__real_setitimer(ITIMER_REAL, &off, NULL);
		raise(SIGALRM);
	}
	if (pgwasm_host_wants_cancel())
		raise(SIGINT);
}

void
pgwasm_poll_host(void)
{
	pgwasm_poll_countdown = POLL_EVERY;
	take_turn();
}

int
__wrap_setitimer(int which, const struct itimerval *new_value, struct itimerval *old_value)
{
	if (which == ITIMER_REAL && new_value != NULL)
	{
		double		ms = new_value->it_value.tv_sec * 1000.0 + new_value->it_value.tv_usec / 1000.0;

		alarm_at = ms > 0 ? emscripten_get_now() + ms : 0;
	}
	return __real_setitimer(which, new_value, old_value);
}

int
__wrap_poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	int			ready;

	take_turn();
	ready = __real_poll(fds, nfds, 0);
	if (ready != 0 || timeout == 0)
		return ready;
	/* Nothing yet: the caller (WaitEventSetWait) counts its own time and asks again. */
	pgwasm_host_sleep(timeout < 0 || timeout > SLEEP_SLICE_MS ? SLEEP_SLICE_MS : timeout);
	return 0;
}
