provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "acr" {
  name     = "rg-acr"
  location = "westeurope"
}

resource "azurerm_container_registry" "main" {
  name                = "acracmeprod"
  resource_group_name = azurerm_resource_group.acr.name
  location            = azurerm_resource_group.acr.location
  sku                 = "Premium"
  admin_enabled       = false

  georeplications {
    location                = "northeurope"
    zone_redundancy_enabled = true
  }
}
