/* ge2_open_regular (file.h). */
#include "graph/file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/error.h"

static const char *kind_of(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a folder";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode) || S_ISBLK(mode))
        return "a device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "a special file";
}

ge2_status ge2_open_regular(const char *path, const char *what, int *fd)
{
    *fd = -1;
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer */
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (f < 0)
        return ge2_error(GE2_ERR_IO, "%s '%s': cannot open: %s", what, path, strerror(errno));
    struct stat sb;
    if (fstat(f, &sb) != 0) {
        int e = errno;
        close(f);
        return ge2_error(GE2_ERR_IO, "%s '%s': cannot stat: %s", what, path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(f);
        return ge2_error(GE2_ERR_IO, "%s '%s' is %s; give a regular file", what, path, kind_of(sb.st_mode));
    }
    int flags = fcntl(f, F_GETFL);
    if (flags >= 0)
        fcntl(f, F_SETFL, flags & ~O_NONBLOCK);
    *fd = f;
    return GE2_OK;
}
