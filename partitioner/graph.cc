// Placeholder until the CSR graph lands.
namespace propeller {}
