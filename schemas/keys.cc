#include "schemas/keys.h"
