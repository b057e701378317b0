/*
 * Who the process runs as.
 *
 * Emscripten answers uid 0 and has no password database, so PostgreSQL would
 * refuse to start ("cannot be run as root") and initdb could not name its
 * superuser.  Inside the instance there is one unprivileged user, "postgres".
 * getpwuid is reached through -Dgetpwuid=pgwasm_getpwuid (Emscripten's libc
 * defines it beside other stubs that PostgreSQL links too).
 *
 * That user also owns every file: PostgreSQL refuses a data directory owned
 * by anyone else, and the files' owner on the host (root, often, when the
 * programs run under Node) means nothing inside.  getuid, geteuid and the
 * stat() family are wrapped at link time (-Wl,--wrap=...): the backend links
 * all of libc (it exports it to side modules), so they cannot simply be
 * defined again.
 */
#include <pwd.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define PGWASM_UID 1000
#define PGWASM_GID 1000

uid_t		__wrap_getuid(void);
uid_t		__wrap_geteuid(void);

uid_t
__wrap_getuid(void)
{
	return PGWASM_UID;
}

uid_t
__wrap_geteuid(void)
{
	return PGWASM_UID;
}

struct passwd *
pgwasm_getpwuid(uid_t uid)
{
	static char name[] = "postgres";
	static char home[] = "/home/postgres";
	static char shell[] = "/bin/sh";
	static char none[] = "";
	static struct passwd entry;

	if (uid != PGWASM_UID)
		return NULL;
	entry.pw_name = name;
	entry.pw_passwd = none;
	entry.pw_uid = PGWASM_UID;
	entry.pw_gid = PGWASM_GID;
	entry.pw_gecos = none;
	entry.pw_dir = home;
	entry.pw_shell = shell;
	return &entry;
}

int			__real_stat(const char *path, struct stat *buffer);
int			__real_lstat(const char *path, struct stat *buffer);
int			__real_fstat(int fd, struct stat *buffer);
int			__real_fstatat(int dirfd, const char *path, struct stat *buffer, int flags);
int			__wrap_stat(const char *path, struct stat *buffer);
int			__wrap_lstat(const char *path, struct stat *buffer);
int			__wrap_fstat(int fd, struct stat *buffer);
int			__wrap_fstatat(int dirfd, const char *path, struct stat *buffer, int flags);

static int
owned(int result, struct stat *buffer)
{
	if (result == 0)
	{
		buffer->st_uid = PGWASM_UID;
		buffer->st_gid = PGWASM_GID;
	}
	return result;
}

int
__wrap_stat(const char *path, struct stat *buffer)
{
	return owned(__real_stat(path, buffer), buffer);
}

int
__wrap_lstat(const char *path, struct stat *buffer)
{
	return owned(__real_lstat(path, buffer), buffer);
}

int
__wrap_fstat(int fd, struct stat *buffer)
{
	return owned(__real_fstat(fd, buffer), buffer);
}

int
__wrap_fstatat(int dirfd, const char *path, struct stat *buffer, int flags)
{
	return owned(__real_fstatat(dirfd, path, buffer, flags), buffer);
}
