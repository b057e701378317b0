/*
 * The in-process engine's session: PostgreSQL's backend answering the wire
 * protocol one frontend message per call from the host.
 *
 * A server backend loops in PostgresMain and blocks in recv() for the next
 * message. In a JavaScript host there is no thread to block: the host calls
 * in when a message is there and gets control back when it has been
 * handled. So this file compiles PostgreSQL's own tcop/postgres.c,
 * unchanged, into its translation unit (its message handlers are static)
 * and takes the place of postgres.o in the in-process link. Two calls in
 * that file are routed here by name:
 *
 *  - InitProcess(), the last step of single-user startup, is followed by
 *    setting up the client connection (the host's wire, below), so that
 *    PostgresMain starts a session that speaks the protocol (ParameterStatus,
 *    BackendKeyData) instead of single-user mode's text console;
 *  - EventTriggerOnLogin(), PostgresMain's last step before its loop, is
 *    followed by a jump back to pgwasm_start(): the session is ready, and
 *    from then on pgwasm_message() does what one turn of the loop does.
 *
 * The client connection is a descriptor whose recv() and send() call the
 * two host functions set by pgwasm_set_wire(); everything in between
 * (buffers, message framing, flushing) is PostgreSQL's own pqcomm.c.
 */
#define InitProcess pgwasm_init_process_and_wire
#define EventTriggerOnLogin pgwasm_session_ready
#include "postgres.c"
#undef InitProcess
#undef EventTriggerOnLogin

#include <fcntl.h>
#include <sys/socket.h>

extern void InitProcess(void);
extern void EventTriggerOnLogin(void);
extern int	__main_argc_argv(int argc, char *argv[]);

typedef int (*pgwasm_wire_fn) (void *data, int length);

/* What the host calls (exported from the module). */
extern void pgwasm_set_wire(pgwasm_wire_fn read, pgwasm_wire_fn write);
extern int	pgwasm_start(int argc, char *argv[]);
extern int	pgwasm_message(void);
extern void pgwasm_flush(void);
extern pg_noreturn void pgwasm_exit(int code);

/* Where postgres.c's two calls go (their names are defined to these above). */
extern void pgwasm_init_process_and_wire(void);
extern void pgwasm_session_ready(void);

/* libc calls wrapped at link time (-Wl,--wrap) for the wire's descriptor. */
extern ssize_t __wrap_recv(int fd, void *buf, size_t len, int flags);
extern ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags);
extern int	__wrap_getsockname(int fd, struct sockaddr *addr, socklen_t *len);

/* The host's side of the connection: read fills, write takes, both return a byte count. */
static pgwasm_wire_fn wire_read = NULL;
static pgwasm_wire_fn wire_write = NULL;
static int	wire_fd = -1;

/* Startup jumps back here once the session is ready for its first message. */
static sigjmp_buf *startup_return = NULL;

/* What PostgresMain keeps in locals across turns of its loop. */
static bool send_ready_for_query = true;
static bool idle_in_transaction_timeout_enabled = false;
static bool idle_session_timeout_enabled = false;

void
pgwasm_set_wire(pgwasm_wire_fn read, pgwasm_wire_fn write)
{
	wire_read = read;
	wire_write = write;
}

extern ssize_t __real_recv(int fd, void *buf, size_t len, int flags);
extern ssize_t __real_send(int fd, const void *buf, size_t len, int flags);
extern int	__real_getsockname(int fd, struct sockaddr *addr, socklen_t *len);

ssize_t
__wrap_recv(int fd, void *buf, size_t len, int flags)
{
	if (fd != wire_fd || wire_fd < 0)
		return __real_recv(fd, buf, len, flags);
	if (wire_read == NULL)
		return 0;
	return wire_read(buf, (int) len);
}

ssize_t
__wrap_send(int fd, const void *buf, size_t len, int flags)
{
	if (fd != wire_fd || wire_fd < 0)
		return __real_send(fd, buf, len, flags);
	if (wire_write == NULL)
		return (ssize_t) len;
	return wire_write((void *) buf, (int) len);
}

/* The connection is a Unix-domain one: no TCP options, no client address. */
int
__wrap_getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	if (fd != wire_fd || wire_fd < 0)
		return __real_getsockname(fd, addr, len);
	memset(addr, 0, *len);
	addr->sa_family = AF_UNIX;
	*len = sizeof(sa_family_t);
	return 0;
}

void
pgwasm_init_process_and_wire(void)
{
	ClientSocket client;

	InitProcess();

	/*
	 * Any descriptor will do as the socket: recv, send and getsockname on it
	 * are answered above, and pqcomm only sets flags on it otherwise.
	 */
	wire_fd = open("/dev/null", O_RDWR);
	if (wire_fd < 0)
		elog(FATAL, "could not open the host wire's descriptor: %m");
	memset(&client, 0, sizeof(client));
	client.sock = wire_fd;
	client.raddr.addr.ss_family = AF_UNIX;
	client.raddr.salen = sizeof(sa_family_t);

	FrontendProtocol = PG_PROTOCOL(3, 0);
	MyProcPort = pq_init(&client);
	MyProcPort->proto = FrontendProtocol;
	MyProcPort->database_name = "";
	MyProcPort->user_name = "";
	whereToSendOutput = DestRemote;
}

void
pgwasm_session_ready(void)
{
	EventTriggerOnLogin();
	if (startup_return != NULL)
		siglongjmp(*startup_return, 1);
}

/*
 * What the loop does before it reads the next message: leave no catalog
 * snapshot held, report the session's state, arm the idle timeouts and say
 * ReadyForQuery.
 */
static void
become_idle(void)
{
	MemoryContextSwitchTo(MessageContext);
	MemoryContextReset(MessageContext);
	InvalidateCatalogSnapshotConditionally();

	if (IsAbortedTransactionBlockState() || IsTransactionOrTransactionBlock())
	{
		bool		aborted = IsAbortedTransactionBlockState();

		set_ps_display(aborted ? "idle in transaction (aborted)" : "idle in transaction");
		pgstat_report_activity(aborted ? STATE_IDLEINTRANSACTION_ABORTED : STATE_IDLEINTRANSACTION, NULL);
		if (IdleInTransactionSessionTimeout > 0
			&& (IdleInTransactionSessionTimeout < TransactionTimeout || TransactionTimeout == 0))
		{
			idle_in_transaction_timeout_enabled = true;
			enable_timeout_after(IDLE_IN_TRANSACTION_SESSION_TIMEOUT, IdleInTransactionSessionTimeout);
		}
	}
	else
	{
		long		stats_timeout;

		if (notifyInterruptPending)
			ProcessNotifyInterrupt(false);
		stats_timeout = pgstat_report_stat(false);
		if (stats_timeout > 0)
		{
			if (!get_timeout_active(IDLE_STATS_UPDATE_TIMEOUT))
				enable_timeout_after(IDLE_STATS_UPDATE_TIMEOUT, stats_timeout);
		}
		else if (get_timeout_active(IDLE_STATS_UPDATE_TIMEOUT))
			disable_timeout(IDLE_STATS_UPDATE_TIMEOUT, false);
		set_ps_display("idle");
		pgstat_report_activity(STATE_IDLE, NULL);
		if (IdleSessionTimeout > 0)
		{
			idle_session_timeout_enabled = true;
			enable_timeout_after(IDLE_SESSION_TIMEOUT, IdleSessionTimeout);
		}
	}
	ReportChangedGUCOptions();
	ReadyForQuery(whereToSendOutput);
	send_ready_for_query = false;
}

/* Outer-level error recovery, as PostgresMain does it when an ERROR reaches its loop. */
static void
recover_from_error(void)
{
	error_context_stack = NULL;
	HOLD_INTERRUPTS();
	disable_all_timeouts(false);
	QueryCancelPending = false;
	idle_in_transaction_timeout_enabled = false;
	idle_session_timeout_enabled = false;
	DoingCommandRead = false;
	pq_comm_reset();
	EmitErrorReport();
	debug_query_string = NULL;
	AbortCurrentTransaction();
	PortalErrorCleanup();
	if (MyReplicationSlot != NULL)
		ReplicationSlotRelease();
	ReplicationSlotCleanup(false);
	jit_reset_after_error();
	MemoryContextSwitchTo(MessageContext);
	FlushErrorState();
	if (doing_extended_query_message)
		ignore_till_sync = true;
	xact_started = false;
	if (pq_is_reading_msg())
		ereport(FATAL,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("terminating connection because protocol synchronization was lost")));
	RESUME_INTERRUPTS();
	if (!ignore_till_sync)
		send_ready_for_query = true;
}

static void
close_message(StringInfo message)
{
	int			close_type = pq_getmsgbyte(message);
	const char *close_target = pq_getmsgstring(message);

	pq_getmsgend(message);
	if (close_type == 'S')
	{
		if (close_target[0] != '\0')
			DropPreparedStatement(close_target, false);
		else
			drop_unnamed_stmt();
	}
	else if (close_type == 'P')
	{
		Portal		portal = GetPortalByName(close_target);

		if (PortalIsValid(portal))
			PortalDrop(portal, false);
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("invalid CLOSE message subtype %d", close_type)));
	pq_putemptymessage(PqMsg_CloseComplete);
}

static void
describe_message(StringInfo message)
{
	int			describe_type;
	const char *describe_target;

	SetCurrentStatementStartTimestamp();
	describe_type = pq_getmsgbyte(message);
	describe_target = pq_getmsgstring(message);
	pq_getmsgend(message);
	if (describe_type == 'S')
		exec_describe_statement_message(describe_target);
	else if (describe_type == 'P')
		exec_describe_portal_message(describe_target);
	else
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("invalid DESCRIBE message subtype %d", describe_type)));
}

static void
parse_message(StringInfo message)
{
	const char *stmt_name;
	const char *query_string;
	int			numParams;
	Oid		   *paramTypes = NULL;

	SetCurrentStatementStartTimestamp();
	stmt_name = pq_getmsgstring(message);
	query_string = pq_getmsgstring(message);
	numParams = pq_getmsgint(message, 2);
	if (numParams > 0)
	{
		paramTypes = palloc_array(Oid, numParams);
		for (int i = 0; i < numParams; i++)
			paramTypes[i] = pq_getmsgint(message, 4);
	}
	pq_getmsgend(message);
	exec_parse_message(query_string, stmt_name, paramTypes, numParams);
}

/* Reads and handles one frontend message; true when the client ended the session. */
static bool
handle_message(void)
{
	int			firstchar;
	StringInfoData message;

	doing_extended_query_message = false;
	MemoryContextSwitchTo(MessageContext);
	MemoryContextReset(MessageContext);
	initStringInfo(&message);

	DoingCommandRead = true;
	firstchar = ReadCommand(&message);
	if (idle_in_transaction_timeout_enabled)
	{
		disable_timeout(IDLE_IN_TRANSACTION_SESSION_TIMEOUT, false);
		idle_in_transaction_timeout_enabled = false;
	}
	if (idle_session_timeout_enabled)
	{
		disable_timeout(IDLE_SESSION_TIMEOUT, false);
		idle_session_timeout_enabled = false;
	}
	CHECK_FOR_INTERRUPTS();
	DoingCommandRead = false;
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
	if (ignore_till_sync && firstchar != EOF)
		return false;

	switch (firstchar)
	{
		case PqMsg_Query:
			{
				const char *query_string;

				SetCurrentStatementStartTimestamp();
				query_string = pq_getmsgstring(&message);
				pq_getmsgend(&message);
				exec_simple_query(query_string);
				send_ready_for_query = true;
			}
			break;
		case PqMsg_Parse:
			parse_message(&message);
			break;
		case PqMsg_Bind:
			SetCurrentStatementStartTimestamp();
			exec_bind_message(&message);
			break;
		case PqMsg_Execute:
			{
				const char *portal_name;
				int			max_rows;

				SetCurrentStatementStartTimestamp();
				portal_name = pq_getmsgstring(&message);
				max_rows = pq_getmsgint(&message, 4);
				pq_getmsgend(&message);
				exec_execute_message(portal_name, max_rows);
			}
			break;
		case PqMsg_FunctionCall:
			SetCurrentStatementStartTimestamp();
			pgstat_report_activity(STATE_FASTPATH, NULL);
			set_ps_display("<FASTPATH>");
			start_xact_command();
			MemoryContextSwitchTo(MessageContext);
			HandleFunctionRequest(&message);
			finish_xact_command();
			send_ready_for_query = true;
			break;
		case PqMsg_Close:
			close_message(&message);
			break;
		case PqMsg_Describe:
			describe_message(&message);
			break;
		case PqMsg_Flush:
			pq_getmsgend(&message);
			pq_flush();
			break;
		case PqMsg_Sync:
			pq_getmsgend(&message);
			EndImplicitTransactionBlock();
			finish_xact_command();
			send_ready_for_query = true;
			break;
		case EOF:
			pgStatSessionEndCause = DISCONNECT_CLIENT_EOF;
			return true;
		case PqMsg_Terminate:
			return true;
		case PqMsg_CopyData:
		case PqMsg_CopyDone:
		case PqMsg_CopyFail:
			/* Left over from a COPY FROM STDIN that failed: ignored, as a server does. */
			break;
		default:
			ereport(FATAL,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("invalid frontend message type %d", firstchar)));
	}
	return false;
}

/*
 * One turn: the next message (when read_message), then ReadyForQuery if it
 * is due, with PostgresMain's error recovery around both. Returns 1 when the
 * client sent Terminate (or its input ended): the host then ends the session
 * with pgwasm_exit().
 */
static int
turn(bool read_message)
{
	sigjmp_buf	local_sigjmp_buf;
	volatile bool done_reading = !read_message;
	volatile int ended = 0;

	/* The host calls in from its own stack frame each time. */
	(void) set_stack_base();
	if (sigsetjmp(local_sigjmp_buf, 1) != 0)
	{
		done_reading = true;
		recover_from_error();
	}
	PG_exception_stack = &local_sigjmp_buf;
	if (!done_reading)
	{
		done_reading = true;
		ended = handle_message() ? 1 : 0;
	}
	if (send_ready_for_query && !ended)
		become_idle();
	PG_exception_stack = NULL;
	return ended;
}

/*
 * Starts the backend as `postgres --single ...` with these arguments and
 * the session on the host's wire. The session's greeting (ParameterStatus,
 * BackendKeyData, ReadyForQuery) is written to the wire. Returns 0 when the
 * session is ready; startup failures are FATAL, which exits.
 */
int
pgwasm_start(int argc, char *argv[])
{
	sigjmp_buf	ready;

	startup_return = &ready;
	if (sigsetjmp(ready, 0) == 0)
	{
		__main_argc_argv(argc, argv);
		/* main() does not return from a backend. */
		return 1;
	}
	startup_return = NULL;
	send_ready_for_query = true;
	return turn(false);
}

/* Handles the next frontend message; the host calls it only when one is there. */
int
pgwasm_message(void)
{
	return turn(true);
}

/* Sends what the backend has buffered for the client. */
void
pgwasm_flush(void)
{
	pq_flush();
}

/* Ends the backend as PostgreSQL does (shutdown checkpoint, exit callbacks); does not return. */
void
pgwasm_exit(int code)
{
	whereToSendOutput = DestNone;
	proc_exit(code);
}
