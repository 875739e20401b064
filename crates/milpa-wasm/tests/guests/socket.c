/* A test guest that tries to open a socket through wasi:sockets (imported by hand, world
 * milpa:test-guests/socket): {"do": "tcp"} or {"do": "udp"}. The sandbox never grants
 * sockets, so each attempt must fail inside the guest. */
#include "milpa_tool.h"

#define SOCKETS_TCP "wasi:sockets/tcp-create-socket@0.2.12"
#define SOCKETS_UDP "wasi:sockets/udp-create-socket@0.2.12"

/* result<own<socket>, error-code>: tag at 0, handle or error code at 4. */
__attribute__((import_module(SOCKETS_TCP), import_name("create-tcp-socket")))
extern void create_tcp_socket(int32_t family, uint32_t *ret);
__attribute__((import_module(SOCKETS_UDP), import_name("create-udp-socket")))
extern void create_udp_socket(int32_t family, uint32_t *ret);

static const char *socket_error(uint32_t code) {
  switch (code) {
    case 0: return "unknown";
    case 1: return "access-denied";
    case 2: return "not-supported";
    default: return "other";
  }
}

int tool_call(const char *args, const struct tool_context *ctx, char **out) {
  (void)ctx;
  char what[16] = "tcp";
  milpa_arg_string(args, "do", what, sizeof what);
  uint32_t ret[2] = {0, 0};
  if (!strcmp(what, "udp")) {
    create_udp_socket(0 /* ipv4 */, ret);
  } else {
    create_tcp_socket(0 /* ipv4 */, ret);
  }
  if ((ret[0] & 0xff) == 0) {
    *out = milpa_format("{\"socket\":\"%s socket created\"}", what);
    return TOOL_OK;
  }
  uint32_t code = ret[1] & 0xff;
  *out = milpa_format("%s socket: %s", what, socket_error(code));
  return TOOL_FAILED;
}
