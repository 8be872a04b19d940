/* Tack: arrays on host and GPU devices that cross library lines without a copy. */
#ifndef TACK_TACK_H
#define TACK_TACK_H

#include "tack/version.h"
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
