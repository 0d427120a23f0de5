/* dlfs-bench-client: reads an epoch view through libdlfs-client and compares
 * it with copying the same bytes (docs/client.md).
 *
 * Pass 1, the client API: dlfs_client_batch over the whole view, and a
 * checksum of every byte of every sample where it lies (the dataset memory or
 * the staging slot), so the bytes are really read; the clock runs over both.
 * Pass 2, the memcpy baseline: the same batches (their calls outside the
 * clock), each sample copied from the mapping into a batch buffer, back to
 * back; the clock runs over the copies only. That is the least a path that
 * copies the bytes pays (read() through the mount copies at least once). The
 * copies are then checksummed on a clock of their own: memcpy + checksum is
 * what a reader that copies and then reads every byte pays, the like-for-like
 * comparison with pass 1. The two checksums must agree. The ratios are pass
 * 1's rate over those two. Both passes run --repeat times; medians are
 * printed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/dlfs_client.h"

typedef struct {
  double seconds;
  double checksum_seconds; /* the memcpy pass: checksumming the copies */
  uint64_t samples;
  uint64_t bytes;
  uint64_t checksum;
} pass_result;

static void usage(FILE* f) {
  fprintf(f,
          "usage: dlfs-bench-client DATASET_DIR [options]\n"
          "\n"
          "Reads the view epochs/EPOCH/WORLD_SIZE/RANK of DATASET_DIR (a dataset directory of a\n"
          "DLFS mount) through libdlfs-client, checksumming every byte, and reports samples/s\n"
          "and GB/s (1e9 bytes) for the batch calls and the checksums together; then reads the\n"
          "same batches again and times only memcpy()s of each sample from the mapping into a\n"
          "batch buffer: the baseline; then the checksum of the copies on its own clock (they\n"
          "must sum as pass 1): memcpy + checksum is a reader that copies, then reads. Prints\n"
          "the medians of --repeat runs and the ratios API / memcpy, API / memcpy+checksum.\n"
          "\n"
          "  --epoch N        epoch of the view (default 0)\n"
          "  --world-size N   world size of the view (default 1)\n"
          "  --rank N         rank of the view (default 0)\n"
          "  --batch N        samples per dlfs_client_batch call (default 256)\n"
          "  --repeat N       runs of each pass (default 5)\n"
          "  --json FILE      also write the figures to FILE\n"
          "  --socket PATH    connect to this client socket (with --dataset) instead of\n"
          "                   finding it from DATASET_DIR (DLFS_CLIENT_SOCKET also overrides it)\n"
          "  --dataset NAME   the dataset's name, with --socket\n"
          "  --help           this text\n");
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A 64-bit sum of the sample's 8-byte words (and its tail bytes), taken from
 * the sample's first byte wherever it lies, so a copy sums the same. Four
 * sums: no one dependency chain limits the rate. */
static uint64_t checksum(const void* data, uint64_t n) {
  const unsigned char* p = (const unsigned char*)data;
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, w[4];
  uint64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    memcpy(w, p + i, 32);
    s0 += w[0];
    s1 += w[1];
    s2 += w[2];
    s3 += w[3];
  }
  for (; i + 8 <= n; i += 8) {
    memcpy(w, p + i, 8);
    s0 += w[0];
  }
  for (; i < n; ++i) s1 += p[i];
  return s0 + s1 + s2 + s3;
}

static int fetch(dlfs_client* c, uint64_t pos, uint32_t batch, dlfs_sample* out, uint32_t* got) {
  int rc = dlfs_client_batch(c, pos, batch, out, got);
  if (rc != 0) fprintf(stderr, "dlfs-bench-client: batch at position %" PRIu64 ": %s\n", pos, dlfs_client_error(c));
  else if (*got == 0) fprintf(stderr, "dlfs-bench-client: batch at position %" PRIu64 " returned nothing\n", pos);
  return rc != 0 || *got == 0 ? -1 : 0;
}

static int api_pass(dlfs_client* c, uint64_t view_samples, uint32_t batch, dlfs_sample* out, pass_result* r) {
  memset(r, 0, sizeof *r);
  double t0 = now();
  for (uint64_t pos = 0; pos < view_samples;) {
    uint32_t got = 0;
    if (fetch(c, pos, batch, out, &got) != 0) return -1;
    for (uint32_t i = 0; i < got; ++i) {
      r->checksum += checksum(out[i].data, out[i].length);
      r->bytes += out[i].length;
    }
    r->samples += got;
    pos += got;
  }
  r->seconds = now() - t0;
  return 0;
}

static int copy_pass(dlfs_client* c, uint64_t view_samples, uint32_t batch, dlfs_sample* out, unsigned char** buf,
                     uint64_t* buf_bytes, pass_result* r) {
  memset(r, 0, sizeof *r);
  for (uint64_t pos = 0; pos < view_samples;) {
    uint32_t got = 0;
    if (fetch(c, pos, batch, out, &got) != 0) return -1;
    uint64_t need = 0;
    for (uint32_t i = 0; i < got; ++i) need += out[i].length;
    if (need > *buf_bytes) {
      unsigned char* grown = (unsigned char*)realloc(*buf, need);
      if (grown == NULL) {
        fprintf(stderr, "dlfs-bench-client: no memory for a batch buffer of %" PRIu64 " bytes\n", need);
        return -1;
      }
      memset(grown, 0, need); /* fault its pages in outside the clock */
      *buf = grown;
      *buf_bytes = need;
    }
    double t0 = now();
    uint64_t off = 0;
    for (uint32_t i = 0; i < got; ++i) {
      memcpy(*buf + off, out[i].data, out[i].length);
      off += out[i].length;
    }
    double t1 = now();
    r->seconds += t1 - t0;
    off = 0;
    for (uint32_t i = 0; i < got; ++i) {
      r->checksum += checksum(*buf + off, out[i].length);
      off += out[i].length;
    }
    r->checksum_seconds += now() - t1;
    r->bytes += off;
    r->samples += got;
    pos += got;
  }
  return 0;
}

static int compare_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y ? 1 : 0;
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, compare_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void json_string(FILE* f, const char* s) {
  fputc('"', f);
  for (; *s; ++s) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

static void json_runs(FILE* f, const pass_result* r, int n) {
  fprintf(f, "[");
  for (int i = 0; i < n; ++i) fprintf(f, "%s%.6f", i ? ", " : "", r[i].seconds);
  fprintf(f, "]");
}

static int parse_u32(const char* s, const char* what, uint32_t* out) {
  char* end = NULL;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v > UINT32_MAX || s[0] == '-') {
    fprintf(stderr, "dlfs-bench-client: %s '%s' is not a number from 0 to %u\n", what, s, UINT32_MAX);
    return -1;
  }
  *out = (uint32_t)v;
  return 0;
}

int main(int argc, char** argv) {
  uint32_t epoch = 0, world_size = 1, rank = 0, batch = 256, repeat = 5;
  const char* json_path = NULL;
  const char* socket_path = NULL;
  const char* dataset = NULL;
  static const struct option options[] = {
      {"epoch", required_argument, NULL, 'e'}, {"world-size", required_argument, NULL, 'w'},
      {"rank", required_argument, NULL, 'r'},  {"batch", required_argument, NULL, 'b'},
      {"repeat", required_argument, NULL, 'n'}, {"json", required_argument, NULL, 'j'},
      {"socket", required_argument, NULL, 's'}, {"dataset", required_argument, NULL, 'd'},
      {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
  int opt;
  while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    int bad = 0;
    switch (opt) {
      case 'e': bad = parse_u32(optarg, "--epoch", &epoch); break;
      case 'w': bad = parse_u32(optarg, "--world-size", &world_size); break;
      case 'r': bad = parse_u32(optarg, "--rank", &rank); break;
      case 'b': bad = parse_u32(optarg, "--batch", &batch); break;
      case 'n': bad = parse_u32(optarg, "--repeat", &repeat); break;
      case 'j': json_path = optarg; break;
      case 's': socket_path = optarg; break;
      case 'd': dataset = optarg; break;
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
    if (bad) return 2;
  }
  if (optind + 1 != argc) {
    fprintf(stderr, "dlfs-bench-client: give one dataset directory (see --help)\n");
    return 2;
  }
  const char* dataset_dir = argv[optind];
  if (batch == 0 || repeat == 0 || world_size == 0 || rank >= world_size || (socket_path && !dataset)) {
    fprintf(stderr, "dlfs-bench-client: --batch and --repeat must be at least 1, --rank below --world-size, "
                    "and --socket needs --dataset\n");
    return 2;
  }

  char err[1024];
  dlfs_client* c = socket_path ? dlfs_client_connect(socket_path, dataset, err, sizeof err)
                               : dlfs_client_open(dataset_dir, err, sizeof err);
  if (c == NULL) {
    fprintf(stderr, "dlfs-bench-client: %s\n", err);
    return 1;
  }
  uint64_t view_samples = 0;
  if (dlfs_client_view(c, epoch, world_size, rank, &view_samples) != 0) {
    fprintf(stderr, "dlfs-bench-client: view epochs/%u/%u/%u: %s\n", epoch, world_size, rank, dlfs_client_error(c));
    dlfs_client_close(c);
    return 1;
  }
  printf("dataset %s: '%s', %" PRIu64 " samples (%s%s), staging %u slots of %" PRIu64 " bytes\n", dataset_dir,
         dlfs_client_dataset(c), dlfs_client_samples(c), dlfs_client_format(c),
         dlfs_client_grouped(c) ? ", grouped" : "", dlfs_client_slots(c), dlfs_client_slot_bytes(c));
  printf("view epochs/%u/%u/%u: %" PRIu64 " samples; batches of %u; %u runs of each pass\n", epoch, world_size, rank,
         view_samples, batch, repeat);

  dlfs_sample* out = (dlfs_sample*)calloc(batch, sizeof *out);
  pass_result* api = (pass_result*)calloc(repeat, sizeof *api);
  pass_result* copy = (pass_result*)calloc(repeat, sizeof *copy);
  double* rates = (double*)calloc(6 * (size_t)repeat, sizeof *rates);
  unsigned char* buf = NULL;
  uint64_t buf_bytes = 0;
  int rc = 0;
  if (out == NULL || api == NULL || copy == NULL || rates == NULL) {
    fprintf(stderr, "dlfs-bench-client: out of memory\n");
    rc = 1;
  }
  for (uint32_t i = 0; rc == 0 && i < repeat; ++i) {
    if (api_pass(c, view_samples, batch, out, &api[i]) != 0 ||
        copy_pass(c, view_samples, batch, out, &buf, &buf_bytes, &copy[i]) != 0) {
      rc = 1;
      break;
    }
    if (api[i].checksum != copy[i].checksum || api[i].checksum != api[0].checksum) {
      fprintf(stderr, "dlfs-bench-client: run %u: checksums differ (API %016" PRIx64 ", memcpy %016" PRIx64
                      ", first run %016" PRIx64 "): the bytes changed under the reader\n",
              i + 1, api[i].checksum, copy[i].checksum, api[0].checksum);
      rc = 1;
      break;
    }
    printf("  run %u: API %.3f s, memcpy %.3f s (+ checksum %.3f s), %" PRIu64 " samples, %" PRIu64 " bytes\n", i + 1,
           api[i].seconds, copy[i].seconds, copy[i].checksum_seconds, api[i].samples, api[i].bytes);
  }
  if (rc == 0) {
    double* api_sps = rates;
    double* api_gbs = rates + repeat;
    double* copy_sps = rates + 2 * repeat;
    double* copy_gbs = rates + 3 * repeat;
    double* reader_sps = rates + 4 * repeat;
    double* reader_gbs = rates + 5 * repeat;
    for (uint32_t i = 0; i < repeat; ++i) {
      /* A pass too short for the clock counts as one nanosecond. */
      double a = api[i].seconds > 1e-9 ? api[i].seconds : 1e-9, m = copy[i].seconds > 1e-9 ? copy[i].seconds : 1e-9;
      api_sps[i] = (double)api[i].samples / a;
      api_gbs[i] = (double)api[i].bytes / a / 1e9;
      copy_sps[i] = (double)copy[i].samples / m;
      copy_gbs[i] = (double)copy[i].bytes / m / 1e9;
      double mc = copy[i].seconds + copy[i].checksum_seconds > 1e-9 ? copy[i].seconds + copy[i].checksum_seconds : 1e-9;
      reader_sps[i] = (double)copy[i].samples / mc;
      reader_gbs[i] = (double)copy[i].bytes / mc / 1e9;
    }
    double as = median(api_sps, (int)repeat), ag = median(api_gbs, (int)repeat);
    double cs = median(copy_sps, (int)repeat), cg = median(copy_gbs, (int)repeat);
    double rs = median(reader_sps, (int)repeat), rg = median(reader_gbs, (int)repeat);
    double ratio = cg > 0 ? ag / cg : 0, reader_ratio = rg > 0 ? ag / rg : 0;
    printf("\nmedians of %u runs        samples/s        GB/s\n", repeat);
    printf("  client API          %14.0f  %10.3f   (batch calls + checksum of every byte)\n", as, ag);
    printf("  memcpy baseline     %14.0f  %10.3f   (memcpy of the samples into a buffer)\n", cs, cg);
    printf("  memcpy + checksum   %14.0f  %10.3f   (a reader that copies, then reads every byte)\n", rs, rg);
    printf("  ratio API / memcpy  %14.2fx\n", ratio);
    printf("  ratio API / memcpy + checksum %4.2fx\n", reader_ratio);
    printf("checksum %016" PRIx64 " over %" PRIu64 " bytes\n", api[0].checksum, api[0].bytes);
    if (json_path != NULL) {
      FILE* f = fopen(json_path, "w");
      if (f == NULL) {
        fprintf(stderr, "dlfs-bench-client: cannot write %s: %s\n", json_path, strerror(errno));
        rc = 1;
      } else {
        fprintf(f, "{\"dataset_dir\": ");
        json_string(f, dataset_dir);
        fprintf(f, ", \"dataset\": ");
        json_string(f, dlfs_client_dataset(c));
        fprintf(f, ", \"epoch\": %u, \"world_size\": %u, \"rank\": %u, \"batch\": %u, \"repeat\": %u,\n", epoch,
                world_size, rank, batch, repeat);
        fprintf(f, " \"samples\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"checksum\": \"%016" PRIx64 "\",\n",
                api[0].samples, api[0].bytes, api[0].checksum);
        fprintf(f, " \"api\": {\"samples_per_s\": %.1f, \"gb_per_s\": %.4f, \"seconds\": ", as, ag);
        json_runs(f, api, (int)repeat);
        fprintf(f, "},\n \"memcpy\": {\"samples_per_s\": %.1f, \"gb_per_s\": %.4f, \"seconds\": ", cs, cg);
        json_runs(f, copy, (int)repeat);
        fprintf(f, "},\n \"memcpy_checksum\": {\"samples_per_s\": %.1f, \"gb_per_s\": %.4f},\n", rs, rg);
        fprintf(f, " \"ratio\": %.4f, \"ratio_memcpy_checksum\": %.4f}\n", ratio, reader_ratio);
        if (fclose(f) != 0) {
          fprintf(stderr, "dlfs-bench-client: cannot write %s: %s\n", json_path, strerror(errno));
          rc = 1;
        }
      }
    }
  }
  free(buf);
  free(rates);
  free(copy);
  free(api);
  free(out);
  dlfs_client_close(c);
  return rc;
}
