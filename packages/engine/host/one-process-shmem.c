/*
 * Shared memory for a PostgreSQL that runs as one process in a WebAssembly
 * instance.
 *
 * The build puts this file in place of src/backend/port/sysv_shmem.c: the wasm
 * runtime has neither System V segments nor fork(), so "shared" memory is an
 * ordinary block of the instance's linear memory, allocated once.  Nothing else
 * can attach to it, which is also why PGSharedMemoryIsInUse can say no.
 *
 * When several backends share one cluster (the real-sessions work), this is the
 * file that changes: the block must then live where every backend's instance
 * sees it at the same address.
 */
#include "postgres.h"

#include <sys/stat.h>
#include <unistd.h>

#include "miscadmin.h"
#include "portability/mem.h"
#include "storage/dsm.h"
#include "storage/pg_shmem.h"
#include "utils/guc_hooks.h"

unsigned long UsedShmemSegID = 0;
void	   *UsedShmemSegAddr = NULL;

PGShmemHeader *
PGSharedMemoryCreate(Size size, PGShmemHeader **shim)
{
	PGShmemHeader *hdr;
	struct stat statbuf;

	if (huge_pages == HUGE_PAGES_ON)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("huge pages not supported on this platform")));
	huge_pages_status = HUGE_PAGES_OFF;

	if (stat(DataDir, &statbuf) < 0)
		ereport(FATAL,
				(errcode_for_file_access(),
				 errmsg("could not stat data directory \"%s\": %m", DataDir)));

	/* Aligned as a mapping would be: buffer pages are read and written in place. */
	hdr = (PGShmemHeader *) aligned_alloc(PG_IO_ALIGN_SIZE, TYPEALIGN(PG_IO_ALIGN_SIZE, size));
	if (hdr == NULL)
		ereport(FATAL,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not allocate %zu bytes of shared memory", size)));

	/* Zeroed, as a fresh mapping is: parts of PostgreSQL count on it. */
	memset(hdr, 0, size);
	hdr->creatorPID = getpid();
	hdr->magic = PGShmemMagic;
	hdr->dsm_control = 0;
	hdr->device = statbuf.st_dev;
	hdr->inode = statbuf.st_ino;
	hdr->totalsize = size;
	hdr->freeoffset = MAXALIGN(sizeof(PGShmemHeader));

	*shim = hdr;
	UsedShmemSegAddr = hdr;
	UsedShmemSegID = 1;
	return hdr;
}

bool
PGSharedMemoryIsInUse(unsigned long id1, unsigned long id2)
{
	return false;
}

void
PGSharedMemoryDetach(void)
{
	/* The block lives as long as the instance: a restart makes a new instance. */
}

void
GetHugePageSize(Size *hugepagesize, int *mmap_flags)
{
	if (hugepagesize)
		*hugepagesize = 0;
	if (mmap_flags)
		*mmap_flags = 0;
}

bool
check_huge_page_size(int *newval, void **extra, GucSource source)
{
	if (*newval != 0)
	{
		GUC_check_errdetail("\"huge_page_size\" must be 0 on this platform.");
		return false;
	}
	return true;
}
