/*
 * System V shared memory, which the wasm runtime does not have.
 *
 * PostgreSQL always compiles the "sysv" kind of dynamic shared memory in
 * (dsm_impl.c), so the calls must link; each fails with ENOSYS, and initdb
 * then picks a kind that works here.
 */
#include <errno.h>
#include <stddef.h>
#include <sys/shm.h>

int
shmget(key_t key, size_t size, int flags)
{
	errno = ENOSYS;
	return -1;
}

void *
shmat(int id, const void *address, int flags)
{
	errno = ENOSYS;
	return (void *) -1;
}

int
shmdt(const void *address)
{
	errno = ENOSYS;
	return -1;
}

int
shmctl(int id, int command, struct shmid_ds *buffer)
{
	errno = ENOSYS;
	return -1;
}
