/* Tack's version, at compile time (the macros) and at run time (the
 * functions: the libtack actually loaded, which may be a newer one of the
 * same SONAME), and TACK_API, which marks each function libtack exports.
 * Everything else in libtack is hidden. */
#ifndef TACK_VERSION_H
#define TACK_VERSION_H

#define TACK_VERSION_MAJOR 0
#define TACK_VERSION_MINOR 1
#define TACK_VERSION_PATCH 0
#define TACK_VERSION_STRING "0.1.0"
/* major * 10000 + minor * 100 + patch, for #if comparisons. */
#define TACK_VERSION_NUMBER (TACK_VERSION_MAJOR * 10000 + TACK_VERSION_MINOR * 100 + TACK_VERSION_PATCH)

/* Exported from libtack; a program may define it first (to nothing, say) to
 * declare the API otherwise. */
#ifndef TACK_API
#if defined(__GNUC__) || defined(__clang__)
#define TACK_API __attribute__((visibility("default")))
#else
#define TACK_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The loaded libtack's version, "major.minor.patch". Never fails. */
TACK_API const char *tack_version(void);

/* The loaded libtack's TACK_VERSION_NUMBER. A program built against these
 * headers may check tack_version_number() / 100 == TACK_VERSION_NUMBER / 100
 * (the same minor series, one ABI until 1.0). Never fails. */
TACK_API int tack_version_number(void);

#ifdef __cplusplus
}
#endif

#endif
