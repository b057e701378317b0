/*
 * Interrupt checks that give the host a turn: included before every source
 * file of the backend and its modules (-include, see build/flags.ts).
 *
 * PostgreSQL checks for interrupts (CHECK_FOR_INTERRUPTS, and a few direct
 * reads) by reading InterruptPending, which a signal handler sets. On one
 * JavaScript thread no handler runs while the engine computes: a timer's
 * callback, another thread's cancel, all wait for the statement to end. So
 * every read of InterruptPending in the backend first counts down, and every
 * POLL_EVERY reads (interrupt-poll.c) the host gets a call, in which due
 * alarms and requested cancels are raised as the signals PostgreSQL handles.
 * The count is inline: a check costs a decrement and a branch more.
 *
 * globals.c, which defines the variable, is compiled without this file.
 */
#ifndef PGWASM_INTERRUPT_POLL_H
#define PGWASM_INTERRUPT_POLL_H

#include <signal.h>

extern volatile sig_atomic_t InterruptPending;
extern int	pgwasm_poll_countdown;
extern void pgwasm_poll_host(void);

static inline volatile sig_atomic_t *
pgwasm_interrupt_pending(void)
{
	if (--pgwasm_poll_countdown < 0)
		pgwasm_poll_host();
	return &InterruptPending;
}

/*
 * From here on the name reads through the countdown. miscadmin.h's own
 * declaration of it then declares the function above again, which C allows.
 */
#define InterruptPending (*pgwasm_interrupt_pending())

#endif
