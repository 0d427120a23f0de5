/* dlfs_client.h is valid C99: this file is compiled as C (-std=c99) and
 * linked with libdlfs-client. It runs without a daemon: a socket that is not
 * there is an error with a message, and the getters take NULL. */
#include "client/dlfs_client.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

static void check(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "client_lib_c_test: FAILED: %s\n", what);
    ++failures;
  }
}

int main(void) {
  char err[256];
  dlfs_sample sample;
  dlfs_client* c = dlfs_client_connect("/nonexistent/dlfs-client.sock", "ds", err, sizeof err);
  check(c == NULL, "connecting to a socket that is not there fails");
  check(strstr(err, "/nonexistent/dlfs-client.sock") != NULL, "the message names the socket");

  c = dlfs_client_open("/nonexistent", err, sizeof err);
  check(c == NULL, "opening a directory that is not there fails");
  check(strstr(err, "/nonexistent/epochs/0/1/0.index") != NULL, "the message names the view file");

  check(dlfs_client_samples(NULL) == 0 && dlfs_client_slots(NULL) == 0 && dlfs_client_grouped(NULL) == 0,
        "the getters take NULL");
  check(dlfs_client_view(NULL, 0, 1, 0, NULL) == -EINVAL, "dlfs_client_view(NULL) is -EINVAL");
  check(dlfs_client_batch(NULL, 0, 1, &sample, NULL) == -EINVAL, "dlfs_client_batch(NULL) is -EINVAL");
  dlfs_client_close(NULL);
  if (failures == 0) printf("client_lib_c_test: ok\n");
  return failures == 0 ? 0 : 1;
}
