/* The registry of compiler libraries loaded per name (src/driver/loaded.c):
 * the first of the names that opens, kept and handed out again without
 * opening anything; where none opens, the first one's failure. */
#include <stdlib.h>
#include <string.h>

#include "../../src/core/internal.h"
#include "../../src/driver/loaded.h"
#include "check.h"

struct api {
    char name[32];
    int serial;
};

static int opens;

/* Opens names beginning "good"; refuses the others, naming them. */
static tack_status fake_open(const char *name, void *slot)
{
    struct api *a = slot;
    opens++;
    CHECK(a->name[0] == 0 && a->serial == 0); /* handed a zeroed table */
    if (strncmp(name, "good", 4) != 0)
        return tack_error_set(TACK_ERUNTIME, "cannot open '%s'", name);
    strcpy(a->name, name);
    a->serial = opens;
    return TACK_OK;
}

static void test_the_first_that_opens_is_kept_and_not_opened_again(void)
{
    static struct tack_loaded_set set = TACK_LOADED_SET_INIT;
    const char *names[] = {"bad-1", "good-1", "good-2"};
    void *first = NULL, *again = NULL;
    CHECK_OK(tack_loaded_get(&set, names, 3, sizeof(struct api), fake_open, "fake", &first));
    CHECK(opens == 2 && !strcmp(((struct api *)first)->name, "good-1"));
    /* Asked again: the loaded one answers, nothing is opened (not even
     * the preferred name, which failed). */
    CHECK_OK(tack_loaded_get(&set, names, 3, sizeof(struct api), fake_open, "fake", &again));
    CHECK(again == first && opens == 2);
    /* Another list that names it finds it too. */
    const char *only[] = {"good-1"};
    CHECK_OK(tack_loaded_get(&set, only, 1, sizeof(struct api), fake_open, "fake", &again));
    CHECK(again == first && opens == 2);
}

static void test_where_none_opens_the_first_failure_is_the_message(void)
{
    static struct tack_loaded_set set = TACK_LOADED_SET_INIT;
    const char *names[] = {"bad-1", "bad-2"};
    void *out = (void *)&set;
    CHECK_STATUS(tack_loaded_get(&set, names, 2, sizeof(struct api), fake_open, "fake", &out), TACK_ERUNTIME);
    CHECK(strstr(tack_last_error(), "cannot open 'bad-1'") && !strstr(tack_last_error(), "bad-2"));
    CHECK(out == (void *)&set); /* untouched */
    CHECK(set.first == NULL);   /* nothing kept */
    /* A later good name still loads: the failures left nothing behind. */
    const char *good[] = {"good-3"};
    CHECK_OK(tack_loaded_get(&set, good, 1, sizeof(struct api), fake_open, "fake", &out));
    CHECK(!strcmp(((struct api *)out)->name, "good-3"));
}

int main(void)
{
    RUN(test_the_first_that_opens_is_kept_and_not_opened_again);
    RUN(test_where_none_opens_the_first_failure_is_the_message);
    CHECK_DONE();
}
