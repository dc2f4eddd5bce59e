/* test_main.c — runs the engine's C tests (registered with TEST() in check.h) and prints TAP.
 *   test_engine               every test
 *   test_engine view dtype    only tests whose "topic/name" contains one of the words
 * Exits 1 when any test failed. */
#include "check.h"

#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  const char *name, *file;
  int line;
  check_test_fn fn;
  char label[160]; /* "topic/name", topic from the file name test_<topic>.c */
} test_entry;

static test_entry *tests;
static int ntests, cap_tests;

/* State of the test being run. */
#define MAX_DETAILS 25
static int failures;
static char *details[MAX_DETAILS];
static int ndetails, dropped_details;
static dle_tensor **tracked;
static int ntracked, cap_tracked;
static jmp_buf abort_jmp;
static const char *current_label;
static int current_number;

static void *grow(void *p, int *cap, size_t elem) {
  *cap = *cap ? *cap * 2 : 64;
  void *q = realloc(p, (size_t)*cap * elem);
  if (!q) {
    fprintf(stdout, "Bail out! out of memory in the test harness\n");
    exit(2);
  }
  return q;
}

void check_register(const char *name, const char *file, int line, check_test_fn fn) {
  if (ntests == cap_tests) tests = grow(tests, &cap_tests, sizeof *tests);
  test_entry *e = &tests[ntests++];
  *e = (test_entry){.name = name, .file = file, .line = line, .fn = fn};
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  if (strncmp(base, "test_", 5) == 0) base += 5;
  int topic_len = (int)strcspn(base, ".");
  snprintf(e->label, sizeof e->label, "%.*s/%s", topic_len, base, name);
}

static void add_detail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void add_detail(const char *fmt, ...) {
  failures++;
  if (ndetails == MAX_DETAILS) {
    dropped_details++;
    return;
  }
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  details[ndetails++] = strdup(buf);
}

static const char *short_file(const char *file) {
  const char *s = strrchr(file, '/');
  return s ? s + 1 : file;
}

bool check_that(bool ok, const char *file, int line, const char *expr, const char *fmt, ...) {
  if (ok) return true;
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  add_detail("%s:%d: %s: %s", short_file(file), line, expr, msg);
  return false;
}

bool check_near(double a, double b, double tol, const char *file, int line, const char *ea,
                const char *eb) {
  if ((isnan(a) && isnan(b)) || a == b || fabs(a - b) <= tol) return true;
  add_detail("%s:%d: %s = %.9g and %s = %.9g differ by %.3g (tolerance %.3g)", short_file(file),
             line, ea, a, eb, b, fabs(a - b), tol);
  return false;
}

bool check_ok(dle_status st, const char *file, int line, const char *expr) {
  if (st == DLE_OK) return true;
  add_detail("%s:%d: %s failed: %s", short_file(file), line, expr, dle_last_error());
  return false;
}

bool check_err(dle_status st, const char *file, int line, const char *expr,
               const char *const *needles) {
  if (st != DLE_ERR) {
    add_detail("%s:%d: %s should have failed but returned %d", short_file(file), line, expr, st);
    return false;
  }
  const char *msg = dle_last_error();
  if (!msg) msg = "(null)"; /* never, but the sanitizer build's format check cannot tell */
  bool ok = true;
  for (int i = 0; needles[i]; i++) {
    const char *needle = needles[i];
    if (strstr(msg, needle)) continue;
    add_detail("%s:%d: %s: message \"%s\" does not mention \"%s\"", short_file(file), line, expr,
               msg, needle);
    ok = false;
  }
  return ok;
}

_Noreturn void check_abort(void) { longjmp(abort_jmp, 1); }

static char skip_reason[256];

_Noreturn void check_skip(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(skip_reason, sizeof skip_reason, fmt, ap);
  va_end(ap);
  if (!skip_reason[0]) snprintf(skip_reason, sizeof skip_reason, "skipped");
  longjmp(abort_jmp, 1);
}

/* UndefinedBehaviorSanitizer calls this hook (weak in its runtime, never called without it) on
 * every report, possibly from a kernel's worker thread: the test running at the time fails. */
static atomic_int ubsan_reports;
void __ubsan_on_report(void);
void __ubsan_on_report(void) { atomic_fetch_add(&ubsan_reports, 1); }

dle_tensor *track(dle_tensor *t) {
  if (!t) return t;
  if (ntracked == cap_tracked) tracked = grow(tracked, &cap_tracked, sizeof *tracked);
  tracked[ntracked++] = t;
  return t;
}

int track_count(void) { return ntracked; }

void track_release_from(int mark) {
  while (ntracked > mark && ntracked > 0) dle_tensor_release(tracked[--ntracked]);
}

static void release_tracked(void) { track_release_from(0); }

#ifndef __SANITIZE_ADDRESS__
/* A crash ends the run; say which test did it in TAP's own words. (Under AddressSanitizer its
 * own handler prints a better report, so this is left out.) */
static void on_crash(int sig) {
  char buf[256];
  int n = snprintf(buf, sizeof buf, "not ok %d - %s\nBail out! %s crashed with signal %d\n",
                   current_number, current_label ? current_label : "?",
                   current_label ? current_label : "a test", sig);
  if (n > 0) (void)!write(1, buf, (size_t)n);
  _exit(3);
}
#endif

static int by_file_and_line(const void *pa, const void *pb) {
  const test_entry *a = pa, *b = pb;
  int c = strcmp(a->file, b->file);
  return c ? c : a->line - b->line;
}

static bool selected(const test_entry *e, int argc, char **argv) {
  if (argc < 2) return true;
  for (int i = 1; i < argc; i++)
    if (strstr(e->label, argv[i])) return true;
  return false;
}

/* Runs one test; returns true when it passed. */
static bool run_one(const test_entry *e, int number) {
  failures = ndetails = dropped_details = 0;
  skip_reason[0] = 0;
  current_label = e->label;
  current_number = number;
  size_t before = dle_memory_allocated();
  int reports = atomic_load(&ubsan_reports);
  if (setjmp(abort_jmp) == 0) e->fn();
  release_tracked();
  if (atomic_load(&ubsan_reports) != reports)
    add_detail("UndefinedBehaviorSanitizer reported %d errors (see stderr)",
               atomic_load(&ubsan_reports) - reports);
  size_t after = dle_memory_allocated();
  if (after != before)
    add_detail("tensor storage in use went from %zu to %zu bytes: %s", before, after,
               after > before ? "a leak" : "freed more than was allocated");
  if (skip_reason[0] && !failures)
    printf("ok %d - %s # SKIP %s\n", number, e->label, skip_reason);
  else
    printf("%s %d - %s\n", failures ? "not ok" : "ok", number, e->label);
  for (int i = 0; i < ndetails; i++) {
    printf("# %s\n", details[i]);
    free(details[i]);
  }
  if (dropped_details) printf("# ... and %d more failed checks\n", dropped_details);
  fflush(stdout);
  return failures == 0;
}

int main(int argc, char **argv) {
#ifndef __SANITIZE_ADDRESS__
  signal(SIGSEGV, on_crash);
  signal(SIGBUS, on_crash);
  signal(SIGFPE, on_crash);
  signal(SIGABRT, on_crash);
#endif
  dle_set_cache_limit(CHECK_CACHE_LIMIT);
  qsort(tests, (size_t)ntests, sizeof *tests, by_file_and_line);
  int run = 0, failed = 0;
  for (int i = 0; i < ntests; i++) {
    if (!selected(&tests[i], argc, argv)) continue;
    if (!run_one(&tests[i], ++run)) failed++;
  }
  printf("1..%d\n", run);
  if (failed) printf("# %d of %d tests failed\n", failed, run);
  free(tests);
  free(tracked);
  return failed ? 1 : 0;
}
