# onnx_unavailable: a ptq built without ONNX refuses onnx-qdq with E1250 and writes nothing.
#   cmake -DPTQ=<ptq> -DEXAMPLES=<examples dir> -P check_unavailable.cmake
set(out "${CMAKE_CURRENT_BINARY_DIR}/onnx_unavailable.onnx")
file(REMOVE "${out}")
execute_process(
  COMMAND "${PTQ}" export --format onnx-qdq --onnx "${EXAMPLES}/digits/model.onnx" --record
          "${EXAMPLES}/digits/manifest.json" --model "${EXAMPLES}/digits/manifest.json" -o "${out}"
  RESULT_VARIABLE rc
  ERROR_VARIABLE err)
set(want "ptq export: error: this ptq was built without ONNX (PTQ_WITH_ONNX=OFF), so it cannot \
read or write ONNX models [E1250]\nnote: install libonnx-dev and rebuild (cmake -DPTQ_WITH_ONNX=ON)\n")
if(NOT rc EQUAL 1 OR NOT err STREQUAL want OR EXISTS "${out}")
  message(FATAL_ERROR "onnx_unavailable: exit ${rc}, stderr:\n${err}\nwanted exit 1 and:\n${want}")
endif()
