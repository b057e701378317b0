/*
 * popen(), pclose() and system() for PostgreSQL's programs when they run
 * under Node.
 *
 * initdb starts the backend through popen(): "r" to read `postgres -V`, "w"
 * to feed it the bootstrap script and the SQL that follows.  There is no fork()
 * in WebAssembly, so the command runs as a child process of Node: for "r" it
 * runs at once and its output is read back from a file; for "w" what the
 * program writes goes to a file that becomes the command's stdin at pclose().
 * The result is a wait status, as pclose() gives.  initdb also tries its
 * settings with system("postgres --check ..."), which runs the same way.
 * Emscripten's own popen() is a weak stub that fails, which these replace;
 * its system() (musl's, through posix_spawn) fails too and is wrapped at link
 * time (-Wl,--wrap=system).  Only linked into programs built to run under
 * Node with the host's files (-sNODERAWFS).
 */
#include <emscripten.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

/* The environment goes along from the C side: setenv() (initdb sets PGDATA) changes only the C copy. */
EM_JS(int, pgwasm_spawn_shell, (const char *command, char **envp, const char *stdin_path, const char *stdout_path), {
	const { spawnSync } = require('node:child_process');
	const fs = require('node:fs');
	const env = {};
	for (let at = envp; HEAPU32[at >> 2] !== 0; at += 4) {
		const entry = UTF8ToString(HEAPU32[at >> 2]);
		const equals = entry.indexOf('=');
		if (equals > 0) env[entry.slice(0, equals)] = entry.slice(equals + 1);
	}
	const stdin = stdin_path ? fs.openSync(UTF8ToString(stdin_path), 'r') : 'inherit';
	const stdout = stdout_path ? fs.openSync(UTF8ToString(stdout_path), 'w') : 'inherit';
	try {
		const run = spawnSync('/bin/sh', ['-c', UTF8ToString(command)], { env, stdio: [stdin, stdout, 'inherit'] });
		if (run.error) return -1;
		/* A wait status: the exit code in the second byte, or the signal number. */
		if (run.status === null) return require('node:os').constants.signals[run.signal] || 9;
		return (run.status & 0xff) << 8;
	} finally {
		if (typeof stdin === 'number') fs.closeSync(stdin);
		if (typeof stdout === 'number') fs.closeSync(stdout);
	}
});

static int
pgwasm_run_command(const char *command, const char *stdin_path, const char *stdout_path)
{
	return pgwasm_spawn_shell(command, environ, stdin_path, stdout_path);
}

typedef struct Piped
{
	FILE	   *stream;
	char	   *command;		/* set for "w": run at pclose() */
	char		path[32];
	int			status;			/* for "r": the command's wait status */
	struct Piped *next;
} Piped;

static Piped *open_pipes = NULL;

FILE *
popen(const char *command, const char *mode)
{
	Piped	   *piped;
	int			fd;
	int			writing = mode[0] == 'w';

	if ((mode[0] != 'r' && mode[0] != 'w') || (piped = calloc(1, sizeof(Piped))) == NULL)
	{
		errno = EINVAL;
		return NULL;
	}
	strcpy(piped->path, "/tmp/pgwasm-pipe-XXXXXX");
	if ((fd = mkstemp(piped->path)) < 0)
	{
		free(piped);
		return NULL;
	}
	close(fd);
	if (writing)
	{
		piped->command = strdup(command);
		piped->stream = fopen(piped->path, "w");
	}
	else
	{
		piped->status = pgwasm_run_command(command, NULL, piped->path);
		piped->stream = piped->status < 0 ? NULL : fopen(piped->path, "r");
	}
	if (piped->stream == NULL)
	{
		unlink(piped->path);
		free(piped->command);
		free(piped);
		errno = ECHILD;
		return NULL;
	}
	piped->next = open_pipes;
	open_pipes = piped;
	return piped->stream;
}

int
pclose(FILE *stream)
{
	Piped	  **link = &open_pipes;
	Piped	   *piped;
	int			status;

	while (*link && (*link)->stream != stream)
		link = &(*link)->next;
	if ((piped = *link) == NULL)
	{
		errno = ECHILD;
		return -1;
	}
	*link = piped->next;
	fclose(stream);
	status = piped->command ? pgwasm_run_command(piped->command, piped->path, NULL) : piped->status;
	unlink(piped->path);
	free(piped->command);
	free(piped);
	return status;
}

int			__wrap_system(const char *command);

int
__wrap_system(const char *command)
{
	/* system(NULL) asks whether there is a shell: there is, Node's. */
	if (command == NULL)
		return 1;
	return pgwasm_run_command(command, NULL, NULL);
}
