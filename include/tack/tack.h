/* Tack: arrays on host and GPU devices that cross library lines without a copy. */
#ifndef TACK_TACK_H
#define TACK_TACK_H

#include "tack/version.h"

/* Threads. Every function may be called from any thread, and from several
 * threads at once, unless its comment says otherwise: reference counts are
 * atomic, the device registry and the kernel cache are locked, and the
 * error message (tack_last_error) and compile log are the calling thread's
 * own. The last release of an object, and so a DLPack deleter or a
 * tack_release_fn, may run on any thread. What Tack does not order for
 * you is work on one array from two threads at once (a fill racing a
 * launch or a copy into it): order those yourself, as with NumPy; likewise
 * messages sent on one socket from two threads. */

#include "tack/status.h"
#include "tack/dtype.h"
#include "tack/dlpack.h"
#include "tack/device.h"
#include "tack/buffer.h"
#include "tack/array.h"
#include "tack/exchange.h"
#include "tack/kernel.h"
#include "tack/report.h"
#include "tack/import.h"

#endif
