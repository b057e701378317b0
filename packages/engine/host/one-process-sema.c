/*
 * Semaphores for a PostgreSQL that runs as one process in a WebAssembly
 * instance.
 *
 * The build puts this file in place of src/backend/port/posix_sema.c: without
 * threads, Emscripten's sem_trywait() always succeeds, so PostgreSQL's reset
 * loop ("take until it would block") never ends.  Here a semaphore is a count.
 * With one process nothing else can ever post one, so a wait on a zero count
 * could only last forever: that is reported instead.
 *
 * When several backends share one cluster, waits become real (a futex-style
 * wait on shared memory) and this file changes with pg_shmem.c.
 */
#include "postgres.h"

#include "storage/ipc.h"
#include "storage/pg_sema.h"
#include "storage/shmem.h"

typedef struct PGSemaphoreData
{
	int			count;
} PGSemaphoreData;

static PGSemaphore semaphores;
static int	created;
static int	reserved;

Size
PGSemaphoreShmemSize(int maxSemas)
{
	return mul_size(maxSemas, sizeof(PGSemaphoreData));
}

void
PGReserveSemaphores(int maxSemas)
{
	semaphores = (PGSemaphore) ShmemAllocUnlocked(PGSemaphoreShmemSize(maxSemas));
	created = 0;
	reserved = maxSemas;
}

PGSemaphore
PGSemaphoreCreate(void)
{
	PGSemaphore sema;

	if (created >= reserved)
		elog(PANIC, "too many semaphores created");
	sema = &semaphores[created++];
	sema->count = 0;
	return sema;
}

void
PGSemaphoreReset(PGSemaphore sema)
{
	sema->count = 0;
}

void
PGSemaphoreLock(PGSemaphore sema)
{
	if (sema->count <= 0)
		elog(PANIC, "semaphore wait with no other process to end it");
	sema->count--;
}

void
PGSemaphoreUnlock(PGSemaphore sema)
{
	sema->count++;
}

bool
PGSemaphoreTryLock(PGSemaphore sema)
{
	if (sema->count <= 0)
		return false;
	sema->count--;
	return true;
}
