#include "constants.h"

constStatus constSetMode(constMode mode)
{
    return mode == CONST_MODE_FAST || mode == CONST_MODE_SAFE ? CONST_SUCCESS : CONST_ERROR_INVALID_VALUE;
}
