/* Registers ge2's own ops when the library loads, in the order of
 * ops/builtin.def, through the extension API's ge2_op_register: so their ids
 * are the GE2_OP_* of ops/ops.h, and user ops registered later (from main
 * on) follow them. A constructor rather than a call from the graph module,
 * which must not depend on ops/; the target is alwayslink so a static link
 * keeps it. Its priority runs it before the built-in kernel candidates'
 * constructors (GE2_OP_CANDIDATES_PRIORITY), which need the ops. */
#include <stdio.h>
#include <stdlib.h>

#include "ops/ops.h"

#define GE2_BUILTIN_OP(id, def) extern const ge2_op_def def;
#include "ops/builtin.def"
#undef GE2_BUILTIN_OP

__attribute__((constructor(GE2_OP_BUILTIN_PRIORITY))) static void ge2_register_builtin_ops(void)
{
    static const ge2_op_def *const builtins[GE2_OP_BUILTIN_COUNT] = {
#define GE2_BUILTIN_OP(id, def) [GE2_OP_##id] = &def,
#include "ops/builtin.def"
#undef GE2_BUILTIN_OP
    };
    for (int i = 0; i < GE2_OP_BUILTIN_COUNT; i++) {
        ge2_op op = -1;
        if (ge2_op_register(builtins[i], &op) != GE2_OK || op != i) {
            /* an internal invariant: built-ins come first, each once */
            fprintf(stderr, "ge2: built-in op %d (%s) registered as %d: %s\n", i, builtins[i]->name, op,
                    ge2_last_error());
            abort();
        }
    }
}
