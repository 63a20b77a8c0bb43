provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "main" {
  name     = "rg-registry"
  location = "westeurope"
}

resource "azurerm_container_registry" "main" {
  name                = "acmeplatformacr"
  resource_group_name = azurerm_resource_group.main.name
  location            = azurerm_resource_group.main.location
  sku                 = "Premium"
  admin_enabled       = false
}
