/*
 * File mappings for a PostgreSQL that runs as one process.
 *
 * PostgreSQL maps a file only for dynamic shared memory: it creates the file
 * (shm_open, or one in pg_dynshmem), maps it MAP_SHARED, and closes the file
 * at once.  Emscripten emulates such a mapping with a copy that it writes
 * back through the descriptor at munmap()/msync() time, when that descriptor
 * number may already belong to a relation file: segments of the statistics
 * area ended up in pg_attribute.  With one process nothing else reads the
 * file, so the mapping is plain zeroed memory and nothing is written back.
 * mmap is wrapped at link time (-Wl,--wrap=mmap); munmap then frees such
 * memory as it frees any anonymous mapping.
 */
#include <stddef.h>
#include <sys/mman.h>
#include <sys/types.h>

void	   *__real_mmap(void *address, size_t length, int protection, int flags, int fd, off_t offset);
void	   *__wrap_mmap(void *address, size_t length, int protection, int flags, int fd, off_t offset);

void *
__wrap_mmap(void *address, size_t length, int protection, int flags, int fd, off_t offset)
{
	if (fd >= 0 && (flags & MAP_SHARED))
		return __real_mmap(address, length, protection, (flags & ~MAP_SHARED) | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return __real_mmap(address, length, protection, flags, fd, offset);
}
