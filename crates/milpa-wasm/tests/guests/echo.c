/* The smallest tool: answers its arguments as they came (the per-call bench's guest). */
#include "milpa_tool.h"

int tool_call(const char *args, const struct tool_context *ctx, char **out) {
  (void)ctx;
  *out = strdup(args);
  return TOOL_OK;
}
