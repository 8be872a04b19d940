"""Real VTK arrays for the VTK tests (test_vtk.py, test_vtk_level_zero.py):
made and read through VTK's own calls, and VTK's dlpack_support swapped in
or out. Import after pytest.importorskip of VTK. Not a test file.
"""

import sys

import numpy as np
import vtkmodules.util
import vtkmodules.vtkCommonCore as vtk_core

SUPPORT = "vtkmodules.util.dlpack_support"


def install(monkeypatch, module):
    """Makes `import vtkmodules.util.dlpack_support` give `module` (None: absent)."""
    monkeypatch.setitem(sys.modules, SUPPORT, module)
    if module is None:
        monkeypatch.delattr(vtkmodules.util, "dlpack_support", raising=False)
    else:
        monkeypatch.setattr(vtkmodules.util, "dlpack_support", module, raising=False)


def vtk_address(vtk_array):
    """The address of a VTK array's first value, as VTK itself reports it."""
    mangled = vtk_array.GetVoidPointer(0)  # "_00005631a0d75d20_p_void"
    assert mangled.startswith("_") and mangled.endswith("_p_void"), mangled
    return int(mangled[1:].split("_")[0], 16)


def make_vtk(class_name, values):
    """A VTK array of class_name holding `values` (1-D: one component), filled
    through VTK's own SetValue."""
    values = np.asarray(values)
    vtk_array = getattr(vtk_core, class_name)()
    vtk_array.SetNumberOfComponents(1 if values.ndim == 1 else values.shape[1])
    vtk_array.SetNumberOfTuples(values.shape[0])
    for i, x in enumerate(values.ravel().tolist()):
        vtk_array.SetValue(i, x)
    return vtk_array


def vtk_values(vtk_array):
    """Every value of a VTK array, read through VTK's own GetValue."""
    return [vtk_array.GetValue(i) for i in range(vtk_array.GetNumberOfValues())]
