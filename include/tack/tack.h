/* Tack: arrays on host and GPU devices that cross library lines without a copy. */
#ifndef TACK_TACK_H
#define TACK_TACK_H

#define TACK_VERSION_MAJOR 0
#define TACK_VERSION_MINOR 1
#define TACK_VERSION_PATCH 0
#define TACK_VERSION_STRING "0.1.0"

#include "tack/status.h"
#include "tack/dtype.h"
#include "tack/dlpack.h"
#include "tack/device.h"
#include "tack/buffer.h"
#include "tack/array.h"
#include "tack/exchange.h"
#include "tack/kernel.h"
#include "tack/report.h"

#endif
