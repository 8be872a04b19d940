/* The one loader of driver and compiler libraries (src/driver/library.c):
 * what it reports when a library or a symbol is missing, and where a
 * library it opened was found, which a driver table keeps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/driver/level_zero.h"
#include "../../src/driver/library.h"
#include "check.h"
#include "tack/tack.h"

static void test_missing_library_says_why(void)
{
    struct tack_library lib;
    CHECK(tack_library_open("libtack-no-such-library.so.7", &lib) == -1);
    CHECK(lib.handle == NULL);
    CHECK(strstr(tack_library_error(&lib), "libtack-no-such-library.so.7") != NULL);
    CHECK(!strcmp(tack_library_path(&lib), ""));
    tack_library_close(&lib); /* safe on a failed open */
}

/* A bare name is found by the dynamic linker's search; the loader reports
 * the file it found, not the name it was given. */
static void test_found_path_of_a_searched_name(void)
{
    struct tack_library lib;
    CHECK(tack_library_open("libm.so.6", &lib) == 0);
    const char *path = tack_library_path(&lib);
    size_t len = strlen(path), tail = strlen("/libm.so.6");
    CHECK(path[0] == '/');
    CHECK(len > tail && !strcmp(path + len - tail, "/libm.so.6"));
    CHECK(!strcmp(tack_library_error(&lib), ""));
    tack_library_close(&lib);
    CHECK(lib.handle == NULL);
}

static void test_symbols(void)
{
    struct tack_library lib;
    CHECK(tack_library_open("libm.so.6", &lib) == 0);
    double (*cosine)(double) = NULL;
    CHECK(tack_library_symbol(&lib, "cos", &cosine, sizeof cosine) == 0);
    CHECK(cosine && cosine(0.0) == 1.0);
    /* A missing symbol clears the slot and names itself. */
    CHECK(tack_library_symbol(&lib, "tack_no_such_symbol", &cosine, sizeof cosine) == -1);
    CHECK(cosine == NULL);
    CHECK(strstr(tack_library_error(&lib), "tack_no_such_symbol") != NULL);
    CHECK(strstr(tack_library_error(&lib), "libm.so.6") != NULL);
    tack_library_close(&lib);
}

/* A driver table keeps where its library was found. */
static void test_driver_table_keeps_its_path(void)
{
    const char *sim = getenv("TACK_SIM_LEVEL_ZERO_PATH");
    if (!sim || !*sim) {
        printf("skipped: TACK_SIM_LEVEL_ZERO_PATH does not name the simulated Level Zero driver\n");
        return;
    }
    setenv("TACK_LEVEL_ZERO_LIBRARY", sim, 1);
    const struct tack_ze_api *ze = NULL;
    CHECK_OK(tack_ze_load(&ze));
    CHECK(ze && !strcmp(tack_library_path(&ze->library), sim));
}

int main(void)
{
    RUN(test_missing_library_says_why);
    RUN(test_found_path_of_a_searched_name);
    RUN(test_symbols);
    RUN(test_driver_table_keeps_its_path);
    CHECK_DONE();
}
