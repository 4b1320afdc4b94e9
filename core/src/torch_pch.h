// The precompiled header of the core's torch translation units.
#pragma once
#include <torch/torch.h>
