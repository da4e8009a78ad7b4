import { app } from "../../scripts/app.js";

app.registerExtension({
  name: "web_pack.marker",
  async setup() {
    window.__webPackSetup = true;
  },
  async beforeRegisterNodeDef(nodeType, nodeData) {
    if (nodeData.name === "WebPackNode") {
      nodeType.prototype.webPackDecorated = true;
    }
  },
});
