/* check.h — a tiny TAP harness for the engine's C tests: TEST() registers a function, CHECK*()
 * record failures with `# detail` lines, REQUIRE*() also end the test; tensors given to track()
 * are released after the test, which then must have given back every byte of tensor storage.
 *
 *   TEST(add_broadcasts_a_row) {
 *     dle_tensor *c;
 *     MAKE(c, dle_add(&c, a, b));            // fails the test (and ends it) on DLE_ERR
 *     CHECK(c->ndim == 2, "ndim is %d", c->ndim);
 *     CHECK_ERR(dle_add(&c, a, bad), "add", "{2,3}", "{4}");
 *   }
 */
#ifndef DLE_CHECK_H
#define DLE_CHECK_H

#include "../../engine/dle.h"

#include <stdbool.h>

typedef void (*check_test_fn)(void);

/* Defines a test; constructors register them, and the runner orders them by file and line so
 * the TAP numbers stay stable. */
#define TEST(name)                                                 \
  static void name(void);                                          \
  __attribute__((constructor)) static void name##_register(void) { \
    check_register(#name, __FILE__, __LINE__, name);               \
  }                                                                \
  static void name(void)

/* Each of these evaluates to true when the check passed. */
#define CHECK(cond, ...) check_that((cond) != 0, __FILE__, __LINE__, #cond, __VA_ARGS__)
/* |a - b| <= tol; two NaNs, or two equal infinities, are near each other. */
#define CHECK_NEAR(a, b, tol) check_near((a), (b), (tol), __FILE__, __LINE__, #a, #b)
/* The call returned DLE_OK (the detail line shows dle_last_error() otherwise). */
#define CHECK_OK(call) check_ok((call), __FILE__, __LINE__, #call)
/* The call returned DLE_ERR and dle_last_error() contains every one of the strings. */
#define CHECK_ERR(call, ...) \
  check_err((call), __FILE__, __LINE__, #call, (const char *const[]){__VA_ARGS__, NULL})

/* Ends the test as skipped (TAP "# SKIP reason"), e.g. when the hardware it needs is absent. */
#define SKIP(...) check_skip(__VA_ARGS__)

/* Like CHECK / CHECK_OK, but a failure also ends the test. */
#define REQUIRE(cond, ...) \
  ((void)(check_that((cond) != 0, __FILE__, __LINE__, #cond, __VA_ARGS__) || (check_abort(), 0)))
#define REQUIRE_OK(call) ((void)(check_ok((call), __FILE__, __LINE__, #call) || (check_abort(), 0)))
/* out = NULL, run the call that fills it, require DLE_OK, then track(out). */
#define MAKE(out, call) ((out) = NULL, REQUIRE_OK(call), (void)track(out))

/* The CPU allocator's cache limit the tests run with: none under AddressSanitizer, so that it sees
 * every use of freed storage (a cached block is never poisoned); the engine's default otherwise. */
#ifdef __SANITIZE_ADDRESS__
#define CHECK_CACHE_LIMIT ((size_t)0)
#else
#define CHECK_CACHE_LIMIT ((size_t)1 << 30)
#endif

void check_register(const char *name, const char *file, int line, check_test_fn fn);
bool check_that(bool ok, const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
bool check_near(double a, double b, double tol, const char *file, int line, const char *ea,
                const char *eb);
bool check_ok(dle_status st, const char *file, int line, const char *expr);
bool check_err(dle_status st, const char *file, int line, const char *expr,
               const char *const *needles);
/* Ends the current test (it is reported as failed). */
_Noreturn void check_abort(void);
_Noreturn void check_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Takes ownership of t (NULL is ignored): released when the current test ends. Returns t. */
dle_tensor *track(dle_tensor *t);
/* For loops that make many tensors: mark = track_count(), ..., track_release_from(mark) releases
 * the tensors tracked since the mark. */
int track_count(void);
void track_release_from(int mark);

#endif
